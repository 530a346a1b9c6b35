//! The label, field and shard selectors of a list, a watch or a deletecollection.

use http::StatusCode;
use serde_json::Value;

use crate::endpoints::request::Context;
use crate::semantics::selector::{FieldSelector, LabelSelector, SelectorError, ShardSelector};
use crate::semantics::status::{ApiError, ApiResult};
use crate::storage::catalog::{Builtin, ResourceDef};

/// Label, field and shard selectors of a list or watch.
#[derive(Debug, Default)]
pub(crate) struct Selectors {
    labels: LabelSelector,
    fields: FieldSelector,
    /// The `shardSelector`, when one is given and the server honours it.
    shards: Option<ShardSelector>,
}

impl Selectors {
    /// Reads the selectors of the request; `sharding` says whether `shardSelector` is honoured
    /// (the `ShardedListAndWatch` feature gate) or, as without the gate, ignored unread.
    pub(crate) fn parse(
        context: &Context,
        def: &ResourceDef,
        sharding: bool,
    ) -> ApiResult<Selectors> {
        let bad = |e: SelectorError| ApiError::bad_request(e.to_string());
        let labels = LabelSelector::parse(context.query.get("labelSelector").unwrap_or_default())
            .map_err(bad)?;
        let fields = FieldSelector::parse(context.query.get("fieldSelector").unwrap_or_default())
            .map_err(bad)?;
        for field in fields.fields() {
            if !field_supported(def, field) {
                return Err(ApiError::bad_request(unsupported_field(def, field)));
            }
        }
        // As the real server: an empty parameter is no selector; an invalid one fails in
        // the storage layer, which answers it as an error that is no API status (500).
        let shards = match context.query.get("shardSelector") {
            Some(text) if sharding && !text.is_empty() => {
                Some(ShardSelector::parse(text).map_err(|e| {
                    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "", e.to_string())
                })?)
            }
            _ => None,
        };
        Ok(Selectors {
            labels,
            fields,
            shards,
        })
    }

    /// Whether no selector filters (the real server's empty predicate).
    pub(crate) fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty() && self.shards.is_none()
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.labels
            .matches(object["metadata"]["labels"].as_object())
            && self.fields.matches(object)
            && self.shards.as_ref().is_none_or(|s| s.matches(object))
    }

    /// The list's `metadata.shardInfo` when a shard selector filtered it: the selector in its
    /// canonical form, which tells the client the server applied it.
    pub(crate) fn shard_info(&self) -> Option<Value> {
        self.shards
            .as_ref()
            .map(|s| serde_json::json!({"selector": s.to_string()}))
    }
}

/// Why a field selector cannot select by `field`, in kube-apiserver's words: the kinds with
/// field labels of their own say it one way, the others (their only fields are the metadata's)
/// another.
fn unsupported_field(def: &ResourceDef, field: &str) -> String {
    let own_labels = matches!(
        (def.group.as_str(), def.kind.as_str()),
        (
            "",
            "Pod" | "Node" | "ReplicationController" | "Event" | "Namespace" | "Secret" | "Service"
        ) | ("batch", "Job")
            | ("events.k8s.io", "Event")
            | ("certificates.k8s.io", "CertificateSigningRequest")
            | ("resource.k8s.io", "ResourceSlice")
    );
    if own_labels || def.is_custom() {
        format!("field label not supported: {field}")
    } else {
        format!(
            "{field:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        )
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
