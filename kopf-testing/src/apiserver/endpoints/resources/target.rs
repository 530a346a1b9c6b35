//! A request on a resource, resolved against the catalog: which resource, version, namespace
//! and object it names.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::apiserver::endpoints::request::ObjectPath;
use crate::apiserver::endpoints::shared::Shared;
use crate::apiserver::semantics::status::{ApiError, ApiResult, Subject};
use crate::apiserver::storage::catalog::ResourceDef;
use crate::apiserver::storage::object::ObjectKey;

/// A request on a resource, resolved against the catalog.
#[derive(Debug)]
pub(crate) struct Target<'a> {
    pub(crate) def: Arc<ResourceDef>,
    pub(crate) version: &'a str,
    pub(crate) path: &'a ObjectPath,
    /// The namespace objects live in (`""` for cluster-scoped resources).
    pub(crate) namespace: String,
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
