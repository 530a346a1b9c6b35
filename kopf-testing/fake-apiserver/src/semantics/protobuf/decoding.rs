//! Decoding a message by its schema into Kubernetes JSON: scalars, nested and inline messages,
//! maps, times, IntOrString, quantities and managed fields, with Go's omission rules.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use time::OffsetDateTime;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;

use super::error::{ProtobufError, Result};
use super::schema::{Card, Field, Kind, Schema};
use super::wire::{Reader, Wire, base64, expect_bytes, expect_varint, for_each_field, text};

/// JSON layout of `metav1.Time`: RFC 3339 in UTC, whole seconds.
pub(crate) const TIME_FORMAT: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");

/// JSON layout of `metav1.MicroTime`: RFC 3339 in UTC with 6 fractional digits.
pub(crate) const MICRO_TIME_FORMAT: &[BorrowedFormatItem<'static>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");

// ---------------------------------------------------------------------------------------------
// Decoding by schema
// ---------------------------------------------------------------------------------------------

/// What has been decoded so far for one field of a message.
#[derive(Default)]
pub(crate) struct Slot {
    /// The value of a single field (the last one sent wins).
    one: Option<Value>,
    /// The values of a repeated field, in wire order.
    list: Vec<Value>,
    /// The entries of a map field, sorted by key (the last one sent per key wins).
    entries: BTreeMap<String, Value>,
}

/// Decodes the message in `buf` by `schema` into a JSON object with the fields in schema order.
pub(crate) fn decode_message(schema: &'static Schema, buf: &[u8]) -> Result<Map<String, Value>> {
    let mut slots: Vec<Slot> = schema.fields.iter().map(|_| Slot::default()).collect();
    for_each_field(buf, |number, wire| {
        let found = schema
            .fields
            .iter()
            .zip(slots.iter_mut())
            .find(|(field, _)| field.number == number);
        match found {
            Some((field, slot)) => decode_field(schema, field, wire, slot),
            None => Ok(()),
        }
    })?;
    let mut out = Map::new();
    for (field, slot) in schema.fields.iter().zip(slots) {
        let name = field.name.to_owned();
        match (field.kind, field.card) {
            (Kind::StringMap | Kind::BytesMap | Kind::StringListMap | Kind::QuantityMap, _) => {
                if !slot.entries.is_empty() {
                    out.insert(name, Value::Object(slot.entries.into_iter().collect()));
                }
            }
            (_, Card::Repeated) => {
                if !slot.list.is_empty() {
                    out.insert(name, Value::Array(slot.list));
                }
            }
            (Kind::Inline(_), _) => {
                if let Some(Value::Object(inner)) = slot.one {
                    out.extend(inner);
                }
            }
            _ => {
                if let Some(value) = slot.one {
                    out.insert(name, value);
                }
            }
        }
    }
    Ok(out)
}

/// Decodes one occurrence of `field` into its slot.
pub(crate) fn decode_field(
    schema: &'static Schema,
    field: &Field,
    wire: Wire<'_>,
    slot: &mut Slot,
) -> Result<()> {
    match (field.kind, field.card, wire) {
        (Kind::StringMap | Kind::BytesMap | Kind::StringListMap | Kind::QuantityMap, _, _) => {
            let entry = expect_bytes(schema.name, field.name, wire)?;
            let (key, value) = decode_map_entry(schema, field, entry)?;
            slot.entries.insert(key, value);
        }
        (Kind::Bool | Kind::Int32 | Kind::Int64, Card::Repeated, Wire::Bytes(packed)) => {
            let mut reader = Reader::new(packed);
            while !reader.is_empty() {
                let value = reader.varint()?;
                slot.list.push(varint_value(field.kind, value));
            }
        }
        (_, Card::Repeated, _) => {
            if let Some(value) = decode_value(schema, field, wire)? {
                slot.list.push(value);
            }
        }
        (_, card, _) => {
            let value = decode_value(schema, field, wire)?;
            slot.one = value.filter(|value| card != Card::OmitZero || !is_zero(value));
        }
    }
    Ok(())
}

/// A varint as JSON for a bool, int32 or int64 field.
pub(crate) fn varint_value(kind: Kind, value: u64) -> Value {
    match kind {
        Kind::Bool => Value::Bool(value != 0),
        // int32 is sign-extended to 64 bits on the wire; Go keeps the low 32 bits.
        Kind::Int32 => Value::from(value as i32),
        _ => Value::from(value as i64),
    }
}

/// Whether a scalar is Go's zero value, which `omitempty` leaves out.
pub(crate) fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        _ => false,
    }
}

/// Decodes one non-map value of `field`; `None` for a zero time or an empty `fieldsV1`.
pub(crate) fn decode_value(
    schema: &'static Schema,
    field: &Field,
    wire: Wire<'_>,
) -> Result<Option<Value>> {
    let (message, name) = (schema.name, field.name);
    let value = match field.kind {
        Kind::String => Value::String(text(expect_bytes(message, name, wire)?)),
        Kind::Bool | Kind::Int32 | Kind::Int64 => {
            varint_value(field.kind, expect_varint(message, name, wire)?)
        }
        Kind::Message(inner) | Kind::Inline(inner) => {
            Value::Object(decode_message(inner, expect_bytes(message, name, wire)?)?)
        }
        Kind::Time | Kind::MicroTime => {
            return decode_time(
                message,
                name,
                field.kind,
                expect_bytes(message, name, wire)?,
            );
        }
        Kind::IntOrString => {
            decode_int_or_string(message, name, expect_bytes(message, name, wire)?)?
        }
        Kind::Quantity => Value::String(decode_quantity(expect_bytes(message, name, wire)?)?),
        Kind::FieldsV1 => {
            return decode_fields_v1(message, name, expect_bytes(message, name, wire)?);
        }
        Kind::StringMap | Kind::BytesMap | Kind::StringListMap | Kind::QuantityMap => {
            // Maps are decoded entry by entry in `decode_field`; treat a stray call as a bytes value.
            base64(expect_bytes(message, name, wire)?)
        }
    };
    Ok(Some(value))
}

/// Decodes a map entry {1: key string, 2: value} of a map field.
pub(crate) fn decode_map_entry(
    schema: &'static Schema,
    field: &Field,
    buf: &[u8],
) -> Result<(String, Value)> {
    let mut key = String::new();
    let mut value = None;
    for_each_field(buf, |number, wire| {
        match number {
            1 => key = text(expect_bytes(schema.name, field.name, wire)?),
            2 => {
                let bytes = expect_bytes(schema.name, field.name, wire)?;
                value = Some(match field.kind {
                    Kind::BytesMap => base64(bytes),
                    Kind::QuantityMap => Value::String(decode_quantity(bytes)?),
                    Kind::StringListMap => decode_string_list(bytes)?,
                    _ => Value::String(text(bytes)),
                });
            }
            _ => {}
        }
        Ok(())
    })?;
    let value = value.unwrap_or_else(|| match field.kind {
        Kind::QuantityMap => Value::String("0".to_owned()),
        Kind::StringListMap => Value::Array(Vec::new()),
        _ => Value::String(String::new()),
    });
    Ok((key, value))
}

/// Decodes an `ExtraValue` {1: repeated string items} into a JSON array of strings.
pub(crate) fn decode_string_list(buf: &[u8]) -> Result<Value> {
    let mut items = Vec::new();
    for_each_field(buf, |number, wire| {
        if number == 1 {
            items.push(Value::String(text(expect_bytes(
                "ExtraValue",
                "items",
                wire,
            )?)));
        }
        Ok(())
    })?;
    Ok(Value::Array(items))
}

/// Decodes a `metav1.Time` or `metav1.MicroTime`; an empty message is the zero time, `None`.
///
/// Like the apiserver, `Time` drops the nanoseconds and `MicroTime` truncates them to microseconds.
pub(crate) fn decode_time(
    message: &'static str,
    field: &'static str,
    kind: Kind,
    buf: &[u8],
) -> Result<Option<Value>> {
    if buf.is_empty() {
        return Ok(None);
    }
    let mut seconds = 0i64;
    let mut nanos = 0i32;
    for_each_field(buf, |number, wire| {
        match number {
            1 => seconds = expect_varint("Timestamp", "seconds", wire)? as i64,
            2 => nanos = expect_varint("Timestamp", "nanos", wire)? as i32,
            _ => {}
        }
        Ok(())
    })?;
    let (nanos, format) = match kind {
        Kind::MicroTime => (
            nanos.saturating_div(1000).saturating_mul(1000),
            MICRO_TIME_FORMAT,
        ),
        _ => (0, TIME_FORMAT),
    };
    let out_of_range = || ProtobufError::TimeOutOfRange { message, field };
    let total = i128::from(seconds)
        .saturating_mul(1_000_000_000)
        .saturating_add(i128::from(nanos));
    let time = OffsetDateTime::from_unix_timestamp_nanos(total).map_err(|_| out_of_range())?;
    if !(0..=9999).contains(&time.year()) {
        return Err(out_of_range());
    }
    let text = time.format(format).map_err(|_| out_of_range())?;
    Ok(Some(Value::String(text)))
}

/// Decodes an `intstr.IntOrString` {1: type, 2: intVal, 3: strVal} into a JSON number or string.
pub(crate) fn decode_int_or_string(
    message: &'static str,
    field: &'static str,
    buf: &[u8],
) -> Result<Value> {
    let mut kind = 0i64;
    let mut int_val = 0i32;
    let mut str_val = String::new();
    for_each_field(buf, |number, wire| {
        match number {
            1 => kind = expect_varint("IntOrString", "type", wire)? as i64,
            2 => int_val = expect_varint("IntOrString", "intVal", wire)? as i32,
            3 => str_val = text(expect_bytes("IntOrString", "strVal", wire)?),
            _ => {}
        }
        Ok(())
    })?;
    match kind {
        0 => Ok(Value::from(int_val)),
        1 => Ok(Value::String(str_val)),
        value => Err(ProtobufError::InvalidIntOrString {
            message,
            field,
            value,
        }),
    }
}

/// Decodes a `resource.Quantity` {1: string}; an absent string is the zero quantity, "0".
pub(crate) fn decode_quantity(buf: &[u8]) -> Result<String> {
    let mut quantity = None;
    for_each_field(buf, |number, wire| {
        if number == 1 {
            quantity = Some(text(expect_bytes("Quantity", "string", wire)?));
        }
        Ok(())
    })?;
    Ok(quantity.unwrap_or_else(|| "0".to_owned()))
}

/// Decodes a `metav1.FieldsV1` {1: raw JSON}; empty raw bytes give `None`.
pub(crate) fn decode_fields_v1(
    message: &'static str,
    field: &'static str,
    buf: &[u8],
) -> Result<Option<Value>> {
    let mut raw: &[u8] = &[];
    for_each_field(buf, |number, wire| {
        if number == 1 {
            raw = expect_bytes("FieldsV1", "raw", wire)?;
        }
        Ok(())
    })?;
    if raw.is_empty() {
        return Ok(None);
    }
    serde_json::from_slice(raw)
        .map(Some)
        .map_err(|source| ProtobufError::InvalidFieldsV1 {
            message,
            field,
            source,
        })
}
