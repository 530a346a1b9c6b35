//! A request on a resource, resolved against the catalog: which resource, version, namespace
//! and object it names.

use std::sync::Arc;

use serde_json::{Value, json};

use http::StatusCode;

use crate::endpoints::request::{Format, ObjectPath};
use crate::endpoints::shared::Shared;
use crate::semantics::status::{ApiError, ApiResult, Subject};
use crate::storage::catalog::ResourceDef;
use crate::storage::object::ObjectKey;

/// A request on a resource, resolved against the catalog.
#[derive(Debug)]
pub(crate) struct Target<'a> {
    pub(crate) def: Arc<ResourceDef>,
    pub(crate) version: &'a str,
    pub(crate) path: &'a ObjectPath,
    /// The namespace objects live in (`""` for cluster-scoped resources).
    pub(crate) namespace: String,
    /// What the client accepts: whole objects, or their metadata only.
    pub(crate) format: Format,
}

impl Target<'_> {
    pub(super) fn subject<'s>(&'s self, name: &'s str) -> Subject<'s> {
        Subject {
            group: &self.def.group,
            plural: &self.def.plural,
            name,
        }
    }

    pub(super) fn key(&self, name: &str) -> ObjectKey {
        (self.namespace.clone(), name.to_string())
    }

    pub(super) fn name(&self) -> &str {
        self.path.name.as_deref().unwrap_or_default()
    }

    /// The object as served in the requested version.
    pub(crate) fn render(&self, object: &Value) -> Value {
        self.def.render(self.version, object)
    }

    /// The object as answered: [`Target::render`]ed, or its `PartialObjectMetadata` when the
    /// client asked for metadata only.
    pub(crate) fn answer(&self, object: &Value) -> Value {
        match self.format {
            Format::Metadata(version) | Format::MetadataList(version) => json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": format!("meta.k8s.io/{version}"),
                "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
            }),
            _ => self.def.render(self.version, object),
        }
    }

    /// A list of answered `items`: the resource's list kind, or a `PartialObjectMetadataList`.
    /// The items of built-in kinds carry no `kind` and `apiVersion`, as kube-apiserver's typed
    /// lists (its custom resources' and metadata-only lists keep them).
    pub(crate) fn list_of(&self, mut items: Vec<Value>, metadata: Value) -> Value {
        let (kind, api_version) = match self.format {
            Format::Metadata(version) | Format::MetadataList(version) => (
                "PartialObjectMetadataList".to_string(),
                format!("meta.k8s.io/{version}"),
            ),
            _ => {
                if !self.def.is_custom() {
                    for item in items.iter_mut().filter_map(Value::as_object_mut) {
                        item.remove("kind");
                        item.remove("apiVersion");
                    }
                }
                (
                    self.def.list_kind.clone(),
                    self.def.api_version(self.version),
                )
            }
        };
        json!({"kind": kind, "apiVersion": api_version, "metadata": metadata, "items": items})
    }

    /// Refuses a metadata-only format that does not fit the answer (`406 Not Acceptable`), as
    /// the real server does: `PartialObjectMetadataList` for one object, or
    /// `PartialObjectMetadata` for a list.
    pub(super) fn acceptable(&self, list: bool) -> ApiResult<()> {
        let type_name = if !self.def.is_custom() {
            format!("*v1.{}", self.def.list_kind)
        } else {
            "*unstructured.UnstructuredList".to_string()
        };
        let message = match (self.format, list) {
            (Format::Metadata(_), true) => format!(
                "you requested PartialObjectMetadata, but the requested object is a list ({type_name})"
            ),
            (Format::MetadataList(_), false) => {
                let type_name = type_name.trim_end_matches("List");
                format!(
                    "you requested PartialObjectMetadataList, but the requested object is not a list ({type_name})"
                )
            }
            _ => return Ok(()),
        };
        Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "NotAcceptable",
            message,
        ))
    }

    /// The object as stored: in the storage version.
    pub(super) fn for_storage(&self, mut object: Value) -> Value {
        let storage = self
            .def
            .versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.as_str())
            .unwrap_or(self.version);
        object["apiVersion"] = json!(self.def.api_version(storage));
        object["kind"] = json!(self.def.kind);
        object
    }
}

pub(super) fn method_not_allowed() -> ApiError {
    ApiError::method_not_allowed("the server does not allow this method on the requested resource")
}

pub(super) fn current(shared: &Shared, target: &Target<'_>, name: &str) -> ApiResult<Arc<Value>> {
    shared
        .read(|s| s.get(&target.def.key(), &target.key(name)).cloned())
        .ok_or_else(|| ApiError::not_found(target.subject(name)))
}
