//! Building a `Table`: one row per object, a cell per printer column, rendered by the column's
//! type, and the age of objects as `duration.HumanDuration` writes it.

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use super::json_path::{Segment, evaluate, parse_path};
use crate::storage::columns::PrinterColumn;

/// Description of the always-present "Name" column (ObjectMeta.name swagger doc).
pub(super) const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// Builds the Table for these objects (already full JSON objects with metadata).
pub(crate) fn build_table(
    objects: &[Value],
    columns: &[PrinterColumn],
    list_meta: Value,
    now: OffsetDateTime,
) -> Value {
    let default_columns;
    let columns = if columns.is_empty() {
        default_columns = [PrinterColumn::default_age()];
        &default_columns[..]
    } else {
        columns
    };
    let mut definitions = vec![json!({
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": NAME_DESCRIPTION,
        "priority": 0,
    })];
    definitions.extend(columns.iter().map(PrinterColumn::definition));
    let parsed: Vec<Option<Vec<Segment>>> = columns
        .iter()
        .map(|column| parse_path(&column.json_path))
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let name = object
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let mut cells = Vec::with_capacity(columns.len() + 1);
            cells.push(Value::String(name.to_owned()));
            for (column, path) in columns.iter().zip(&parsed) {
                let matches = path
                    .as_deref()
                    .map(|segments| evaluate(object, vec![object], segments))
                    .unwrap_or_default();
                cells.push(render_cell(&column.type_, &matches, now));
            }
            let metadata = object.get("metadata").cloned().unwrap_or_else(|| json!({}));
            json!({
                "cells": cells,
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata,
                },
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

/// Renders one cell from a column's JSONPath matches, per the column's type.
fn render_cell(column_type: &str, matches: &[&Value], now: OffsetDateTime) -> Value {
    match matches {
        [] => Value::Null,
        [single] => render_single(column_type, single, now),
        many => Value::String(
            many.iter()
                .map(|value| value_text(value))
                .collect::<Vec<_>>()
                .join(","),
        ),
    }
}

/// Renders a single matched value like the apiserver's `cellForJSONValue` / string printing.
fn render_single(column_type: &str, value: &Value, now: OffsetDateTime) -> Value {
    match (column_type, value) {
        (_, Value::Null) => Value::Null,
        ("string", other) => Value::String(value_text(other)),
        ("integer", Value::Number(number)) => {
            if number.is_i64() || number.is_u64() {
                Value::Number(number.clone())
            } else {
                number
                    .as_f64()
                    .and_then(truncate_to_i64)
                    .map_or(Value::Null, Value::from)
            }
        }
        ("number", Value::Number(number)) => Value::Number(number.clone()),
        ("boolean", Value::Bool(flag)) => Value::Bool(*flag),
        ("date", Value::String(text)) => match OffsetDateTime::parse(text, &Rfc3339) {
            Ok(timestamp) => Value::String(human_duration(now - timestamp)),
            Err(_) => Value::String(text.clone()),
        },
        _ => Value::Null,
    }
}

/// Go's `int64(f)` for finite, in-range floats (truncation toward zero).
fn truncate_to_i64(value: f64) -> Option<i64> {
    // 2^63 is exactly representable as f64.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    (value.is_finite() && (-LIMIT..LIMIT).contains(&value)).then(|| value.trunc() as i64)
}

/// Text of a JSON value: strings as-is, everything else as compact JSON.
fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// Kubernetes' duration.HumanDuration, as used for AGE columns.
pub(crate) fn human_duration(d: time::Duration) -> String {
    const SECOND: i64 = 1_000_000_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;
    // Go's time.Duration is int64 nanoseconds; time.Since saturates at its bounds.
    let nanos = d.whole_nanoseconds();
    let d = i64::try_from(nanos).unwrap_or(if nanos < 0 { i64::MIN } else { i64::MAX });
    // d.Seconds() as Go computes it, then int() truncation.
    let seconds = ((d / SECOND) as f64 + (d % SECOND) as f64 / 1e9) as i64;
    if seconds < -1 {
        return "<invalid>".to_owned();
    } else if seconds < 0 {
        return "0s".to_owned();
    } else if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = d / MINUTE;
    if minutes < 10 {
        let s = (d / SECOND) % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    } else if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = d / HOUR;
    if hours < 8 {
        let m = (d / MINUTE) % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        format!("{hours}h{m}m")
    } else if hours < 48 {
        format!("{hours}h")
    } else if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        format!("{}d{}h", hours / 24, h)
    } else if hours < 24 * 365 * 2 {
        format!("{}d", hours / 24)
    } else if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        format!("{}y{}d", hours / 24 / 365, dy)
    } else {
        format!("{}y", hours / 24 / 365)
    }
}
