//! Two masked answers compared field by field: each difference is a field's path (`code`,
//! `body.metadata.labels.app`, `events[1].type`) with the fake server's value and the real
//! one's.

use std::fmt;

use serde_json::Value;

/// One field that differs between the servers' answers to one step.
#[derive(Debug, Clone)]
pub(crate) struct Difference {
    pub(crate) sequence: String,
    pub(crate) step: String,
    /// The request, as sent to the real server, for the report.
    pub(crate) request: String,
    /// The field's path in the answer.
    pub(crate) field: String,
    /// The fake server's value (`None`: it has no such field).
    pub(crate) fake: Option<Value>,
    pub(crate) real: Option<Value>,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |value: &Option<Value>| match value {
            None => "(absent)".to_string(),
            Some(value) => {
                let text = value.to_string();
                if text.chars().count() > 600 {
                    format!("{}…", text.chars().take(600).collect::<String>())
                } else {
                    text
                }
            }
        };
        writeln!(f, "{} / {}: {}", self.sequence, self.step, self.field)?;
        writeln!(f, "    request: {}", self.request)?;
        writeln!(f, "    fake:    {}", show(&self.fake))?;
        write!(f, "    real:    {}", show(&self.real))
    }
}

/// The paths where `fake` and `real` differ, with both values. Objects of different kinds
/// (an object against a `Status`) differ as a whole, not field by field; an object with a
/// kind against one without differs field by field (`kind` among them).
pub(crate) fn differences(
    fake: &Value,
    real: &Value,
) -> Vec<(String, Option<Value>, Option<Value>)> {
    let mut found = Vec::new();
    walk("", Some(fake), Some(real), &mut found);
    found
}

fn walk(
    path: &str,
    fake: Option<&Value>,
    real: Option<&Value>,
    found: &mut Vec<(String, Option<Value>, Option<Value>)>,
) {
    match (fake, real) {
        (Some(Value::Object(a)), Some(Value::Object(b)))
            if a.get("kind") == b.get("kind")
                || a.get("kind").is_none()
                || b.get("kind").is_none() =>
        {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for key in keys {
                let child = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                walk(&child, a.get(key), b.get(key), found);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            if a.len() != b.len() {
                found.push((
                    format!("{path}.length"),
                    Some(a.len().into()),
                    Some(b.len().into()),
                ));
            }
            for (i, (x, y)) in a.iter().zip(b.iter()).enumerate() {
                walk(&format!("{path}[{i}]"), Some(x), Some(y), found);
            }
        }
        (a, b) if a == b => {}
        (a, b) => found.push((path.to_string(), a.cloned(), b.cloned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_differ_one_by_one_and_kinds_as_a_whole() {
        let fake =
            json!({"code": 200, "body": {"kind": "ConfigMap", "data": {"a": "1"}, "x": [1, 2]}});
        let real = json!({"code": 200, "body": {"kind": "ConfigMap", "data": {"a": "2", "b": "3"}, "x": [1]}});
        let found: Vec<String> = differences(&fake, &real).into_iter().map(|d| d.0).collect();
        assert_eq!(found, ["body.data.a", "body.data.b", "body.x.length"]);

        let fake = json!({"body": {"kind": "ConfigMap", "data": {}}});
        let real = json!({"body": {"kind": "Status", "status": "Success"}});
        let found: Vec<String> = differences(&fake, &real).into_iter().map(|d| d.0).collect();
        assert_eq!(found, ["body"]);
    }
}
