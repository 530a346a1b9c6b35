//! Which webhooks a request reaches, as kube-apiserver's predicates decide: the rules
//! (scope, operations, groups, versions, resources and subresources), the namespace and object
//! selectors, and last the CEL `matchConditions`.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::configuration::{FailurePolicy, Rule, Webhook};
use crate::semantics::authorization::Identity;
use crate::semantics::schema;
use crate::semantics::selector::LabelSelector;
use crate::storage::catalog::{Builtin, ResourceDef};

/// The operation a request is admitted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Create,
    Update,
    Delete,
}

impl Operation {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
        }
    }
}

/// What admission knows of one request on one object.
#[derive(Debug, Clone)]
pub(crate) struct Attributes {
    pub(crate) operation: Operation,
    pub(crate) def: Arc<ResourceDef>,
    /// The version the request was made in.
    pub(crate) version: String,
    /// `""` for the main resource.
    pub(crate) subresource: String,
    /// The kind of the subresource's objects (`{group, version, kind}`) when it is not the
    /// resource's own (`autoscaling/v1` `Scale`); its objects are sent as they are.
    pub(crate) subresource_kind: Option<Value>,
    /// `""` for cluster-scoped resources.
    pub(crate) namespace: String,
    /// `""` while a `generateName` has not been turned into a name.
    pub(crate) name: String,
    /// The object as it would be stored (none for a deletion), in the storage version.
    pub(crate) object: Option<Value>,
    /// The stored object (updates and deletions), in the storage version.
    pub(crate) old_object: Option<Value>,
    pub(crate) user: Identity,
    pub(crate) dry_run: bool,
    /// The request's Create-, Update- or DeleteOptions.
    pub(crate) options: Value,
}

impl Attributes {
    /// The version of the resource the webhook is called with: the request's version when a
    /// rule names it, else (with `matchPolicy: Equivalent`) another served version a rule
    /// names; `None` when no rule matches.
    pub(crate) fn matched_version(&self, webhook: &Webhook) -> Option<String> {
        let matches = |version: &str| webhook.rules.iter().any(|rule| self.fits(rule, version));
        if matches(&self.version) {
            return Some(self.version.clone());
        }
        if webhook.exact {
            return None;
        }
        self.def
            .versions
            .iter()
            .map(|v| v.name.clone())
            .find(|version| version != &self.version && matches(version))
    }

    /// An object as a webhook matched in `version` sees it: rendered in that version, or as
    /// it is for a subresource of another kind.
    pub(crate) fn reviewed(&self, version: &str, object: &Value) -> Value {
        match self.subresource_kind {
            Some(_) => object.clone(),
            None => self.def.render(version, object),
        }
    }

    fn fits(&self, rule: &Rule, version: &str) -> bool {
        let any =
            |list: &[String], value: &str| list.iter().any(|item| item == "*" || item == value);
        let scope = match rule.scope.as_str() {
            "Cluster" => self.namespace.is_empty(),
            "Namespaced" => !self.namespace.is_empty(),
            _ => true,
        };
        scope
            && any(&rule.operations, self.operation.as_str())
            && any(&rule.api_groups, &self.def.group)
            && any(&rule.api_versions, version)
            && rule.resources.iter().any(|entry| {
                let (resource, subresource) = entry.split_once('/').unwrap_or((entry, ""));
                (resource == "*" || resource == self.def.plural)
                    && (subresource == "*" || subresource == self.subresource)
            })
    }

    /// Whether the webhook's `namespaceSelector` selects the request: a Namespace by its own
    /// labels, a namespaced object by its namespace's (`namespace_labels`), and any other
    /// cluster-scoped object always.
    pub(crate) fn in_selected_namespace(
        &self,
        webhook: &Webhook,
        namespace_labels: Option<&Map<String, Value>>,
    ) -> bool {
        let is_namespace = self.def.builtin == Some(Builtin::Namespace);
        if self.namespace.is_empty() && !is_namespace {
            return true;
        }
        let Some(selector) = LabelSelector::from_object(&webhook.namespace_selector) else {
            return false;
        };
        if is_namespace {
            return self.labelled(|labels| selector.matches(labels));
        }
        selector.matches(namespace_labels)
    }

    /// Whether the webhook's `objectSelector` selects the object or the old object.
    pub(crate) fn selected_object(&self, webhook: &Webhook) -> bool {
        let Some(selector) = LabelSelector::from_object(&webhook.object_selector) else {
            return false;
        };
        self.labelled(|labels| selector.matches(labels))
    }

    /// Whether `test` holds for the labels of the object or of the old object.
    fn labelled(&self, test: impl Fn(Option<&Map<String, Value>>) -> bool) -> bool {
        [&self.object, &self.old_object]
            .into_iter()
            .flatten()
            .any(|object| test(object["metadata"]["labels"].as_object()))
    }
}

/// Whether the webhook's `matchConditions` let the call happen: `Ok(false)` when one is
/// false, else an error when one could not be evaluated (the request fails under
/// `failurePolicy: Fail`), else `Ok(true)`. `request` is the `AdmissionRequest` the webhook
/// would get.
pub(crate) fn conditions_hold(webhook: &Webhook, request: &Value) -> Result<bool, String> {
    let mut failure = None;
    for condition in &webhook.match_conditions {
        let variables = [
            ("object", &request["object"]),
            ("oldObject", &request["oldObject"]),
            ("request", request),
        ];
        match schema::evaluate_condition(&condition.expression, &variables) {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            Err(error) => {
                failure.get_or_insert(format!(
                    "failed to evaluate the match condition {:?}: {error}",
                    condition.name
                ));
            }
        }
    }
    match failure {
        Some(error) if webhook.failure_policy == FailurePolicy::Fail => Err(error),
        Some(_) => Ok(false),
        None => Ok(true),
    }
}
