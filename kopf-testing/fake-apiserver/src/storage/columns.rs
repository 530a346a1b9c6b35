//! The columns `kubectl get` shows for a resource: a CRD version's `additionalPrinterColumns`,
//! or the default `Age` column.

use serde_json::{Value, json};

/// Description of the default "Age" column (ObjectMeta.creationTimestamp swagger doc).
pub(crate) const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// One column as declared by a CRD's additionalPrinterColumns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PrinterColumn {
    /// Column header, e.g. "Ready".
    pub(crate) name: String,
    /// OpenAPI type: integer, number, string, boolean or date.
    pub(crate) type_: String,
    /// Optional OpenAPI format hint, e.g. "int32"; may be empty.
    pub(crate) format: String,
    /// Human readable description; may be empty.
    pub(crate) description: String,
    /// 0 for the default view, higher values only shown with `-o wide`.
    pub(crate) priority: i64,
    /// JSONPath evaluated against each object, e.g. ".spec.replicas".
    pub(crate) json_path: String,
}

impl PrinterColumn {
    /// Parses one entry of a CRD version's `additionalPrinterColumns` (JSON: name, type, format, description, priority, jsonPath), None when malformed.
    pub(crate) fn from_crd(value: &Value) -> Option<Self> {
        let object = value.as_object()?;
        let required = |key: &str| -> Option<String> {
            object
                .get(key)?
                .as_str()
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        let optional = |key: &str| -> Option<String> {
            match object.get(key) {
                None | Some(Value::Null) => Some(String::new()),
                Some(Value::String(text)) => Some(text.clone()),
                Some(_) => None,
            }
        };
        let priority = match object.get("priority") {
            None | Some(Value::Null) => 0,
            Some(other) => other.as_i64()?,
        };
        Some(Self {
            name: required("name")?,
            type_: required("type")?,
            format: optional("format")?,
            description: optional("description")?,
            priority,
            json_path: required("jsonPath")?,
        })
    }

    /// The column served when a CRD version declares no printer columns.
    pub(crate) fn default_age() -> Self {
        Self {
            name: "Age".to_owned(),
            type_: "date".to_owned(),
            format: String::new(),
            description: CREATION_TIMESTAMP_DESCRIPTION.to_owned(),
            priority: 0,
            json_path: ".metadata.creationTimestamp".to_owned(),
        }
    }

    /// This column's `TableColumnDefinition`.
    pub(crate) fn definition(&self) -> Value {
        let description = if self.description.is_empty() {
            format!(
                "Custom resource definition column (in JSONPath format): {}",
                self.json_path
            )
        } else {
            self.description.clone()
        };
        json!({
            "name": self.name,
            "type": self.type_,
            "format": self.format,
            "description": description,
            "priority": self.priority,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_crd_parses_and_rejects() {
        let full = json!({
            "name": "Replicas", "type": "integer", "format": "int32",
            "description": "desired", "priority": 1, "jsonPath": ".spec.replicas",
        });
        assert_eq!(
            PrinterColumn::from_crd(&full),
            Some(PrinterColumn {
                name: "Replicas".into(),
                type_: "integer".into(),
                format: "int32".into(),
                description: "desired".into(),
                priority: 1,
                json_path: ".spec.replicas".into(),
            })
        );
        let minimal = json!({"name": "Ready", "type": "string", "jsonPath": ".status.ready"});
        let column = PrinterColumn::from_crd(&minimal).unwrap();
        assert_eq!(
            (
                column.format.as_str(),
                column.description.as_str(),
                column.priority
            ),
            ("", "", 0)
        );
        for bad in [
            json!(null),
            json!("x"),
            json!([]),
            json!({"type": "string", "jsonPath": ".a"}),
            json!({"name": "A", "jsonPath": ".a"}),
            json!({"name": "A", "type": "string"}),
            json!({"name": "", "type": "string", "jsonPath": ".a"}),
            json!({"name": 1, "type": "string", "jsonPath": ".a"}),
            json!({"name": "A", "type": "string", "jsonPath": ".a", "priority": "1"}),
            json!({"name": "A", "type": "string", "jsonPath": ".a", "priority": 1.5}),
            json!({"name": "A", "type": "string", "jsonPath": ".a", "format": 3}),
            json!({"name": "A", "type": "string", "jsonPath": ".a", "description": []}),
        ] {
            assert_eq!(PrinterColumn::from_crd(&bad), None, "{bad}");
        }
    }
}
