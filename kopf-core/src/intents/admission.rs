//! Admission handlers: validating and mutating webhooks that kube-apiserver calls before it
//! stores an object (Kopf's `@kopf.on.validate` and `@kopf.on.mutate`). This is the plain
//! registration API; the attribute macros generate the same descriptors.
//!
//! ```
//! use kopf::AdmissionError;
//! use kopf::admission::Operation;
//! use kopf::registry::{AdmissionHandler, Registry};
//! use kopf::resources::Selector;
//!
//! let examples = Selector::new("kopf.dev", "v1", "kopfexamples");
//! let registry = Registry::new()
//!     .with(AdmissionHandler::validating(examples.clone(), "check-size", |invocation| async move {
//!         if invocation.spec()["size"].as_i64().unwrap_or(0) > 10 {
//!             return Err(AdmissionError::new("spec.size is at most 10").code(422).into());
//!         }
//!         Ok(None)
//!     }).operations([Operation::Create, Operation::Update]))
//!     .with(AdmissionHandler::mutating(examples, "default-size", |invocation| async move {
//!         if invocation.spec()["size"].is_null() {
//!             invocation.patch().set("spec.size", 1);
//!         }
//!         Ok(None)
//!     }));
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::future::Future;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

use crate::actions::invocation::{
    HandlerFn, HandlerResult, Invocation, Options, boxed, rbac_setters,
};
use crate::structs::filters::{MetaFilter, ValueFilter};
use crate::structs::resources::Selector;
use crate::structs::reviews::Operation;

/// Whether an admission handler only judges requests or may also change their objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AdmissionKind {
    /// `on_validate`: allows or denies; in a `ValidatingWebhookConfiguration`.
    Validating,
    /// `on_mutate`: may also patch the object; in a `MutatingWebhookConfiguration`.
    Mutating,
}

/// A validating or mutating admission handler (Kopf's `@kopf.on.validate` and
/// `@kopf.on.mutate`).
///
/// kube-apiserver calls the operator's webhook server for the requests that the handler's
/// webhook matches; the handler runs once per request, never retried, and any error denies
/// the request ([`AdmissionError`](crate::AdmissionError) says with which message and code).
/// A mutating handler's [`patch`](crate::Invocation::patch) goes back to the API server as a
/// JSON patch; a validating handler's patch is ignored.
///
/// Besides the resource arguments, the invocation tells
/// [`operation`](crate::Invocation::operation), [`subresource`](crate::Invocation::subresource),
/// [`dryrun`](crate::Invocation::dryrun), [`userinfo`](crate::Invocation::userinfo),
/// [`headers`](crate::Invocation::headers), [`sslpeer`](crate::Invocation::sslpeer), and
/// collects [`warnings`](crate::Invocation::warnings); `old`, `new` and `diff` compare
/// `oldObject` with `object`.
#[derive(Clone)]
pub struct AdmissionHandler {
    pub(crate) id: String,
    pub(crate) kind: AdmissionKind,
    pub(crate) selector: Selector,
    pub(crate) function: HandlerFn,
    pub(crate) options: Options,
    pub(crate) operations: Option<BTreeSet<Operation>>,
    pub(crate) subresource: Option<String>,
    pub(crate) persistent: bool,
    pub(crate) side_effects: bool,
    pub(crate) ignore_failures: bool,
}

impl AdmissionHandler {
    fn new<F, Fut>(kind: AdmissionKind, selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        AdmissionHandler {
            id: id.into(),
            kind,
            selector,
            function: boxed(function),
            options: Options::default(),
            operations: None,
            subresource: None,
            persistent: false,
            side_effects: false,
            ignore_failures: false,
        }
    }

    /// A validating handler (`on_validate`): allows the request, or denies it with an error.
    pub fn validating<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(AdmissionKind::Validating, selector, id, function)
    }

    /// A mutating handler (`on_mutate`): may change the object through its patch, or deny the
    /// request with an error.
    pub fn mutating<F, Fut>(selector: Selector, id: &str, function: F) -> Self
    where
        F: Fn(Invocation) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = HandlerResult> + Send + 'static,
    {
        Self::new(AdmissionKind::Mutating, selector, id, function)
    }

    /// Only for these operations (default: all): the rules of the managed webhook list them.
    ///
    /// A mutating handler is skipped for `DELETE` unless `DELETE` is its only operation (as
    /// in Kopf: there is no object to mutate).
    ///
    /// # Panics
    ///
    /// If `operations` is empty: a webhook for no operation is never called (Kopf raises
    /// `ValueError` too). The attributes check this at compile time.
    pub fn operations(mut self, operations: impl IntoIterator<Item = Operation>) -> Self {
        let operations: BTreeSet<Operation> = operations.into_iter().collect();
        assert!(
            !operations.is_empty(),
            "the admission handler {:?} is given no operations: leave them out for all, or name at least one",
            self.id
        );
        self.operations = Some(operations);
        self
    }

    /// Also for this operation: Kopf's deprecated singular `operation=`, which adds to
    /// [`operations`](Self::operations) (alone, it is the only one).
    #[deprecated(
        note = "as in Kopf, the singular `operation` is deprecated: write `operations = [..]`"
    )]
    pub fn operation(mut self, operation: Operation) -> Self {
        self.operations
            .get_or_insert_with(BTreeSet::new)
            .insert(operation);
        self
    }

    /// Only for this subresource: `"status"`, `"scale"`…, or `"*"` for the main object and
    /// every subresource. Default: the main object only.
    pub fn subresource(mut self, subresource: &str) -> Self {
        self.subresource = Some(subresource.into());
        self
    }

    /// Keep this handler's webhook in the managed configurations when the operator exits (for
    /// policies that must hold while it is down: with [`ignore_failures`](Self::ignore_failures)
    /// unset, matching requests then fail).
    pub fn persistent(mut self) -> Self {
        self.persistent = true;
        self
    }

    /// The handler has side effects that it skips on dry runs (`sideEffects: NoneOnDryRun`
    /// instead of `None`). Check [`dryrun`](crate::Invocation::dryrun).
    pub fn side_effects(mut self) -> Self {
        self.side_effects = true;
        self
    }

    /// Let requests through when the operator cannot be reached or fails to answer
    /// (`failurePolicy: Ignore` instead of `Fail`). A denial is never ignored.
    pub fn ignore_failures(mut self) -> Self {
        self.ignore_failures = true;
        self
    }

    /// Only for objects whose label `key` passes the filter. Value, present and absent filters
    /// also go to the managed webhook's `objectSelector`.
    pub fn label(mut self, key: &str, filter: MetaFilter) -> Self {
        self.options.labels.insert(key.into(), filter);
        self
    }

    /// Only for objects whose annotation `key` passes the filter.
    pub fn annotation(mut self, key: &str, filter: MetaFilter) -> Self {
        self.options.annotations.insert(key.into(), filter);
        self
    }

    /// Only when the predicate holds.
    pub fn when(mut self, predicate: impl Fn(&Invocation) -> bool + Send + Sync + 'static) -> Self {
        self.options.when = Some(std::sync::Arc::new(predicate));
        self
    }

    /// Only for objects that have the dotted `field` (with [`value`](Self::value): whose field
    /// passes the filter). The id gets `/field` appended, as in Kopf.
    pub fn field(mut self, field: &str) -> Self {
        let path = crate::structs::diff::parse_field(field);
        if self.options.field.is_none() {
            self.id = format!("{}/{}", self.id, path.join("."));
        }
        self.options.field = Some(path);
        self
    }

    /// With a [`field`](Self::field): only when its value passes.
    pub fn value(mut self, filter: ValueFilter) -> Self {
        self.options.value = Some(filter);
        self
    }

    /// A value passed to the handler as `param`.
    pub fn param(mut self, param: serde_json::Value) -> Self {
        self.options.param = Some(param);
        self
    }

    rbac_setters!();

    /// The handler's id: the last segment of its webhook's URL path, and the base of the
    /// webhook's name in managed configurations.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether it validates or mutates.
    pub fn kind(&self) -> AdmissionKind {
        self.kind
    }
}

/// What managed webhook configurations are made of.
impl AdmissionHandler {
    /// The resource it serves.
    pub(crate) fn selector(&self) -> &Selector {
        &self.selector
    }

    /// Its operations; `None` for all.
    pub(crate) fn operations_set(&self) -> Option<&BTreeSet<Operation>> {
        self.operations.as_ref()
    }

    /// `None` for the main object only, `Some("*")` for it and every subresource.
    pub(crate) fn subresource_name(&self) -> Option<&str> {
        self.subresource.as_deref()
    }

    pub(crate) fn is_persistent(&self) -> bool {
        self.persistent
    }

    pub(crate) fn has_side_effects(&self) -> bool {
        self.side_effects
    }

    pub(crate) fn ignores_failures(&self) -> bool {
        self.ignore_failures
    }

    /// The webhook's `objectSelector.matchExpressions`, from the label filters that are not
    /// callables (Kopf's): present → `Exists`, absent → `DoesNotExist`, a value → `In
    /// [value]`; in key order. Empty when there is none (then the webhook has no selector).
    pub(crate) fn label_requirements(&self) -> Vec<LabelSelectorRequirement> {
        self.options
            .labels
            .iter()
            .filter_map(|(key, filter)| {
                let (operator, values) = match filter {
                    MetaFilter::Value(value) => ("In", Some(vec![value.clone()])),
                    MetaFilter::Present => ("Exists", None),
                    MetaFilter::Absent => ("DoesNotExist", None),
                    MetaFilter::Callable(_) => return None,
                };
                Some(LabelSelectorRequirement {
                    key: key.clone(),
                    operator: operator.into(),
                    values,
                })
            })
            .collect()
    }
}

impl AdmissionHandler {
    /// Whether a request of this operation is for this handler at all: mutating handlers skip
    /// `DELETE` unless it is their only operation (Kopf's rule; `operations` otherwise only
    /// shapes the webhook's rules).
    pub(crate) fn serves_operation(&self, operation: Operation) -> bool {
        match (self.kind, operation) {
            (AdmissionKind::Mutating, Operation::Delete) => self
                .operations
                .as_ref()
                .is_some_and(|ops| ops.len() == 1 && ops.contains(&Operation::Delete)),
            _ => true,
        }
    }

    /// Whether a request on this subresource (`None`: the main object) is for this handler.
    pub(crate) fn serves_subresource(&self, subresource: Option<&str>) -> bool {
        self.subresource.as_deref() == Some("*") || self.subresource.as_deref() == subresource
    }
}

impl fmt::Debug for AdmissionHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmissionHandler")
            .field("id", &self.id)
            .field("kind", &self.kind)
            .field("selector", &self.selector)
            .field("operations", &self.operations)
            .field("subresource", &self.subresource)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handler(kind: AdmissionKind) -> AdmissionHandler {
        let selector = Selector::new("kopf.dev", "v1", "kopfexamples");
        AdmissionHandler::new(kind, selector, "h", |_| async { Ok(None) })
    }

    #[test]
    fn label_filters_become_the_object_selector() {
        let handler = handler(AdmissionKind::Validating)
            .label("app", MetaFilter::Value("web".into()))
            .label("tier", MetaFilter::Present)
            .label("old", MetaFilter::Absent)
            .label("odd", MetaFilter::callable(|_| true));
        let requirements: Vec<(String, String, Option<Vec<String>>)> = handler
            .label_requirements()
            .into_iter()
            .map(|r| (r.key, r.operator, r.values))
            .collect();
        assert_eq!(
            requirements,
            [
                ("app".into(), "In".into(), Some(vec!["web".into()])),
                ("old".into(), "DoesNotExist".into(), None),
                ("tier".into(), "Exists".into(), None),
            ]
        );
    }

    #[test]
    fn mutating_handlers_skip_deletions_unless_only_for_deletions() {
        let mutating = handler(AdmissionKind::Mutating);
        assert!(mutating.serves_operation(Operation::Create));
        assert!(!mutating.serves_operation(Operation::Delete));
        let both = mutating
            .clone()
            .operations([Operation::Delete, Operation::Update]);
        assert!(!both.serves_operation(Operation::Delete));
        let deletions = mutating.operations([Operation::Delete]);
        assert!(deletions.serves_operation(Operation::Delete));
        assert!(handler(AdmissionKind::Validating).serves_operation(Operation::Delete));
    }

    #[test]
    fn subresources_match_exactly_or_by_star() {
        let main = handler(AdmissionKind::Validating);
        assert!(main.serves_subresource(None));
        assert!(!main.serves_subresource(Some("status")));
        let status = main.clone().subresource("status");
        assert!(status.serves_subresource(Some("status")));
        assert!(!status.serves_subresource(None));
        let all = main.subresource("*");
        assert!(all.serves_subresource(None) && all.serves_subresource(Some("scale")));
    }

    #[test]
    #[should_panic(expected = "given no operations")]
    fn no_operations_is_a_mistake() {
        let _ = handler(AdmissionKind::Validating).operations([]);
    }

    #[test]
    #[allow(
        deprecated,
        reason = "Kopf's deprecated singular `operation` is tested"
    )]
    fn the_singular_operation_adds_to_the_operations() {
        let alone = handler(AdmissionKind::Validating).operation(Operation::Create);
        assert_eq!(
            alone.operations_set(),
            Some(&BTreeSet::from([Operation::Create]))
        );
        let both = handler(AdmissionKind::Mutating)
            .operations([Operation::Update])
            .operation(Operation::Delete);
        assert_eq!(
            both.operations_set(),
            Some(&BTreeSet::from([Operation::Update, Operation::Delete]))
        );
    }
}
