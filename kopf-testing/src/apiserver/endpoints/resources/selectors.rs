//! The label and field selectors of a list, a watch or a deletecollection.

use serde_json::Value;

use crate::apiserver::endpoints::request::Context;
use crate::apiserver::semantics::selector::{FieldSelector, LabelSelector, SelectorError};
use crate::apiserver::semantics::status::{ApiError, ApiResult};
use crate::apiserver::storage::catalog::{Builtin, ResourceDef};

/// Label and field selectors of a list or watch.
#[derive(Debug, Default)]
pub(crate) struct Selectors {
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Selectors {
    pub(crate) fn parse(context: &Context, def: &ResourceDef) -> ApiResult<Selectors> {
        let bad = |e: SelectorError| ApiError::bad_request(e.to_string());
        let labels = LabelSelector::parse(context.query.get("labelSelector").unwrap_or_default())
            .map_err(bad)?;
        let fields = FieldSelector::parse(context.query.get("fieldSelector").unwrap_or_default())
            .map_err(bad)?;
        for field in fields.fields() {
            if !field_supported(def, field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
        }
        Ok(Selectors { labels, fields })
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.labels
            .matches(object["metadata"]["labels"].as_object())
            && self.fields.matches(object)
    }
}

fn field_supported(def: &ResourceDef, field: &str) -> bool {
    if matches!(field, "metadata.name" | "metadata.namespace") {
        return true;
    }
    match def.builtin {
        Some(Builtin::Pod) => matches!(
            field,
            "spec.nodeName"
                | "spec.restartPolicy"
                | "spec.schedulerName"
                | "spec.serviceAccountName"
                | "spec.hostNetwork"
                | "status.phase"
                | "status.podIP"
                | "status.nominatedNodeName"
        ),
        Some(Builtin::Event | Builtin::EventsV1) => {
            field.starts_with("involvedObject.")
                || field.starts_with("regarding.")
                || matches!(field, "reason" | "reportingComponent" | "source" | "type")
        }
        Some(Builtin::Secret) => field == "type",
        Some(Builtin::Namespace) => field == "status.phase",
        Some(Builtin::Node) => field == "spec.unschedulable",
        _ => false,
    }
}
