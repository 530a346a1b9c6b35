//! Kopf's hierarchies toolkit: children made owned by their parent, named after it, put in its
//! namespace and given its labels, before the handler creates them.
//!
//! ```
//! # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
//! let mut child = serde_json::json!({
//!     "apiVersion": "v1",
//!     "kind": "ConfigMap",
//!     "data": {"greeting": "hello"},
//! });
//! kopf::hierarchies::adopt(&mut child, invocation.body())?;
//! // Now owned by the handler's object (and deleted with it by Kubernetes), named
//! // `<parent's name>-<random suffix>`, in the parent's namespace, with the parent's labels:
//! // ready to be created with `invocation.client()`.
//! # Ok(None)
//! # }
//! ```
//!
//! **Children** are anything the functions can change the metadata of, one or many:
//! - a JSON body, `&mut serde_json::Value` (a JSON array is taken item by item);
//! - a typed object, `&mut K` for any [`kube::Resource`]: a `k8s_openapi` type such as
//!   `Pod`, a `#[derive(kube::CustomResource)]` type, a `DynamicObject`;
//! - a typed object's nested metadata, `&mut ObjectMeta` (a pod template's, say);
//! - many of them: anything iterable over those (`&mut [Value]`, `&mut Vec<Pod>`,
//!   `[&mut a, &mut b]`, `&mut Option<Pod>`, `pods.iter_mut()`, ...).
//!
//! **Owners** are a JSON body, `&serde_json::Value` (such as the handler's
//! [`body`](crate::Invocation::body)), or a typed object `&K` for any [`kube::Resource`] of a
//! static type. They must be as the API server returned them: an owner reference needs the
//! owner's `uid`. [`adopt_to_current`] takes the object of the handler running now as the
//! owner, as Kopf's `kopf.adopt(objs)` does when no owner is given; [`CurrentObject`] is that
//! owner for the other functions. Kopf's keyword options are [`Options`], taken by the
//! `*_with` variants.
//!
//! The functions change the children only (never the owner, never anything in the cluster):
//! they are meant for children about to be created. A child that is not a Kubernetes object
//! (say, a JSON string, or `metadata.labels` that is not an object) is an error; the children
//! before it in a sequence are changed already.
//!
//! The `Form` type parameters of [`Children`] and [`Owner`] only let one function take both
//! JSON and typed objects: they are inferred, never written.

use std::marker::PhantomData;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Map, Value};

use crate::actions::current::Current;

/// Why the children could not be changed. With `?` in a handler, it is an arbitrary error:
/// the handler is retried, which helps only if the object changes (for a bad owner or child
/// made by the handler itself, it is a bug to fix).
///
/// ```
/// let manifest = serde_json::json!({
///     "apiVersion": "kopf.dev/v1",
///     "kind": "KopfExample",
///     "metadata": {"name": "parent"},
/// });
/// let error = kopf::hierarchies::adopt(&mut serde_json::json!({}), &manifest).unwrap_err();
/// assert_eq!(error, kopf::hierarchies::HierarchyError::IncompleteOwner { field: "metadata.uid" });
/// assert!(error.to_string().starts_with("the owner has no metadata.uid"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HierarchyError {
    /// The owner lacks a field that owner references need.
    #[error(
        "the owner has no {field}: pass the owner as the API server returned it (such as the \
         handler's body), not a manifest of it"
    )]
    IncompleteOwner {
        /// The missing field: `apiVersion`, `kind`, `metadata.name` or `metadata.uid`.
        field: &'static str,
    },
    /// A child is not a Kubernetes object.
    #[error("a child is {found}, not a Kubernetes object (a JSON object)")]
    NotAnObject {
        /// What the child is instead: `null`, `a string`, ...
        found: &'static str,
    },
    /// A field of a child's metadata has a type Kubernetes would reject.
    #[error("a child's {field} is {found}, not {expected}")]
    MalformedChild {
        /// The field: `metadata`, `metadata.labels`, `metadata.ownerReferences`.
        field: &'static str,
        /// What it should be.
        expected: &'static str,
        /// What it is.
        found: &'static str,
    },
    /// `nested` fields were asked of a typed child, whose nested objects the toolkit cannot
    /// reach (it sees a typed child's metadata only).
    #[error(
        "nested fields ({field}) are labelled in JSON children only: for a typed child, pass \
         the nested object's metadata as a child too (e.g. `&mut template.metadata`, an \
         `ObjectMeta`)"
    )]
    NestedInTyped {
        /// The first nested field asked for.
        field: String,
    },
    /// A nested field of a child is not an object, so it cannot be labelled.
    #[error("a child's nested field {field} is {found}, not an object")]
    MalformedNested {
        /// The nested field, as given.
        field: String,
        /// What it is instead.
        found: &'static str,
    },
    /// [`adopt_to_current`] was called where no handler of an object is running.
    #[error(
        "no handler of an object is running here to adopt the children to: adopt_to_current() \
         works only within a resource handler (not in tasks or threads it spawns); elsewhere, \
         pass the owner to kopf::hierarchies::adopt()"
    )]
    NoCurrentObject,
}

/// The form of a JSON child or owner (inferred, never written).
#[derive(Debug)]
pub enum AsJson {}

/// The form of a typed child or owner, a [`kube::Resource`] (inferred, never written).
#[derive(Debug)]
pub enum AsTyped {}

/// The form of a child given as its metadata, an `ObjectMeta` (inferred, never written): the
/// nested metadata of a typed object, such as a pod template's.
#[derive(Debug)]
pub enum AsMeta {}

/// The form of the object of the handler running now, [`CurrentObject`] (inferred, never
/// written).
#[derive(Debug)]
pub enum AsCurrent {}

/// The form of many children, each of the form `F` (inferred, never written).
#[derive(Debug)]
pub struct AsMany<F>(PhantomData<F>);

/// One or many children whose metadata the toolkit changes (see the [module](self) docs):
/// `&mut serde_json::Value`, `&mut K` for a [`kube::Resource`] `K`, or anything iterable
/// over those. Sealed: it cannot be implemented outside of kopf.
pub trait Children<Form> {
    /// Calls `visit` with the metadata of each child, in order, until an error.
    #[doc(hidden)]
    fn visit(
        self,
        visit: &mut dyn FnMut(Child<'_>) -> Result<(), HierarchyError>,
    ) -> Result<(), HierarchyError>;
}

/// An owner of children (see the [module](self) docs): `serde_json::Value` or a
/// [`kube::Resource`] of a static type. Sealed: it cannot be implemented outside of kopf.
pub trait Owner<Form> {
    /// What the toolkit takes from the owner.
    #[doc(hidden)]
    fn facts(&self) -> Result<private::Facts, HierarchyError>;
}

mod private {
    //! Sealing: the types the traits' methods take cannot be named outside of kopf.

    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::{Map, Value};

    /// A child's metadata-holder: a JSON object (its `metadata` made on demand) or a typed
    /// object's metadata.
    pub enum Child<'a> {
        Json(&'a mut Map<String, Value>),
        Typed(&'a mut ObjectMeta),
    }

    /// What the toolkit takes from an owner, checked complete.
    #[derive(Debug)]
    pub struct Facts {
        pub(super) api_version: String,
        pub(super) kind: String,
        pub(super) name: String,
        pub(super) uid: String,
        pub(super) namespace: Option<String>,
        pub(super) labels: BTreeMap<String, String>,
    }
}

use private::{Child, Facts};

impl Children<AsJson> for &mut Value {
    fn visit(
        self,
        visit: &mut dyn FnMut(Child<'_>) -> Result<(), HierarchyError>,
    ) -> Result<(), HierarchyError> {
        match self {
            Value::Object(object) => visit(Child::Json(object)),
            Value::Array(items) => items.iter_mut().try_for_each(|item| item.visit(visit)),
            other => Err(HierarchyError::NotAnObject {
                found: describe(other),
            }),
        }
    }
}

impl<K: kube::Resource> Children<AsTyped> for &mut K {
    fn visit(
        self,
        visit: &mut dyn FnMut(Child<'_>) -> Result<(), HierarchyError>,
    ) -> Result<(), HierarchyError> {
        visit(Child::Typed(self.meta_mut()))
    }
}

impl Children<AsMeta> for &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
    fn visit(
        self,
        visit: &mut dyn FnMut(Child<'_>) -> Result<(), HierarchyError>,
    ) -> Result<(), HierarchyError> {
        visit(Child::Typed(self))
    }
}

impl<I, F> Children<AsMany<F>> for I
where
    I: IntoIterator,
    I::Item: Children<F>,
{
    fn visit(
        self,
        visit: &mut dyn FnMut(Child<'_>) -> Result<(), HierarchyError>,
    ) -> Result<(), HierarchyError> {
        self.into_iter().try_for_each(|child| child.visit(visit))
    }
}

impl Owner<AsJson> for Value {
    fn facts(&self) -> Result<Facts, HierarchyError> {
        let meta = &self["metadata"];
        let required =
            |value: &Value, field| text(value).ok_or(HierarchyError::IncompleteOwner { field });
        let labels = meta["labels"].as_object().into_iter().flatten();
        Ok(Facts {
            api_version: required(&self["apiVersion"], "apiVersion")?,
            kind: required(&self["kind"], "kind")?,
            name: required(&meta["name"], "metadata.name")?,
            uid: required(&meta["uid"], "metadata.uid")?,
            namespace: text(&meta["namespace"]),
            labels: labels
                .filter_map(|(key, value)| Some((key.clone(), value.as_str()?.to_string())))
                .collect(),
        })
    }
}

impl<K: kube::Resource<DynamicType = ()>> Owner<AsTyped> for K {
    fn facts(&self) -> Result<Facts, HierarchyError> {
        let meta = self.meta();
        let required = |value: &Option<String>, field| {
            value
                .clone()
                .filter(|v| !v.is_empty())
                .ok_or(HierarchyError::IncompleteOwner { field })
        };
        Ok(Facts {
            api_version: K::api_version(&()).into_owned(),
            kind: K::kind(&()).into_owned(),
            name: required(&meta.name, "metadata.name")?,
            uid: required(&meta.uid, "metadata.uid")?,
            namespace: meta.namespace.clone().filter(|ns| !ns.is_empty()),
            labels: meta.labels.clone().unwrap_or_default(),
        })
    }
}

/// The object of the handler running now, as the owner: what Kopf infers when no owner is
/// given (`kopf.adopt(objs)`, `kopf.append_owner_reference(objs)`, ...).
///
/// Within a handler of an object (an async handler's attempt, or a sync handler's run), it
/// is that object; anywhere else, the functions given it fail with
/// [`HierarchyError::NoCurrentObject`].
///
/// ```
/// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
/// use kopf::hierarchies::{self, CurrentObject};
///
/// let mut child = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap"});
/// hierarchies::append_owner_reference(&mut child, &CurrentObject)?;
/// hierarchies::label(&mut child, CurrentObject.labels()?, false)?;
/// hierarchies::harmonize_naming(&mut child, &CurrentObject.name()?, true)?;
/// # Ok(None)
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct CurrentObject;

impl CurrentObject {
    fn facts(self) -> Result<Facts, HierarchyError> {
        let body = Current::with(|current| current.body.clone())
            .filter(|body| body.is_object())
            .ok_or(HierarchyError::NoCurrentObject)?;
        Owner::<AsJson>::facts(body.value())
    }

    /// The labels of the object (Kopf's `kopf.label(objs)` without labels labels with them).
    pub fn labels(self) -> Result<std::collections::BTreeMap<String, String>, HierarchyError> {
        Ok(self.facts()?.labels)
    }

    /// The name of the object (Kopf's `kopf.harmonize_naming(objs)` without a name).
    pub fn name(self) -> Result<String, HierarchyError> {
        Ok(self.facts()?.name)
    }

    /// The namespace of the object, `None` if cluster-scoped (Kopf's
    /// `kopf.adjust_namespace(objs)` without a namespace).
    pub fn namespace(self) -> Result<Option<String>, HierarchyError> {
        Ok(self.facts()?.namespace)
    }
}

impl Owner<AsCurrent> for CurrentObject {
    fn facts(&self) -> Result<Facts, HierarchyError> {
        CurrentObject::facts(*self)
    }
}

/// Kopf's keyword options of the hierarchy functions, for the `*_with` variants: each reads
/// the options that its Kopf counterpart takes, and ignores the others.
///
/// ```
/// use kopf::hierarchies::{self, Options};
///
/// let owner = serde_json::json!({
///     "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
///     "metadata": {"name": "db", "namespace": "ns", "uid": "u1", "labels": {"app": "db"}},
/// });
/// let mut child = serde_json::json!({
///     "kind": "Deployment",
///     "metadata": {"name": "mine"},
///     "spec": {"template": {"metadata": {}}},
/// });
/// let options = Options::default().forced(true).strict(true).nested("spec.template");
/// hierarchies::adopt_with(&mut child, &owner, &options)?;
/// assert_eq!(child["metadata"]["name"], "db", "forced: renamed after the owner");
/// assert_eq!(child["spec"]["template"]["metadata"]["labels"]["app"], "db");
///
/// let options = Options::default().controller(None).block_owner_deletion(Some(false));
/// let mut other = serde_json::json!({});
/// hierarchies::append_owner_reference_with(&mut other, &owner, &options)?;
/// assert_eq!(other["metadata"]["ownerReferences"][0].get("controller"), None);
/// assert_eq!(other["metadata"]["ownerReferences"][0]["blockOwnerDeletion"], false);
/// # Ok::<(), kopf::hierarchies::HierarchyError>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// Replace what the children have already: labels of the same keys, names, namespaces
    /// (Kopf's `forced`; off by default).
    pub forced: bool,
    /// Name the children exactly after the owner rather than with its name as a
    /// `generateName` prefix (Kopf's `strict`; off by default).
    pub strict: bool,
    /// Fields of the children whose objects are labelled too, such as `spec.template` of a
    /// Deployment or `spec.jobTemplate` of a CronJob (Kopf's `nested`; dotted paths). A
    /// field that a child lacks is skipped, as in Kopf.
    pub nested: Vec<String>,
    /// The owner reference's `controller` (Kopf: `True`); `None` leaves it out.
    pub controller: Option<bool>,
    /// The owner reference's `blockOwnerDeletion` (Kopf: `True`); `None` leaves it out.
    pub block_owner_deletion: Option<bool>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            forced: false,
            strict: false,
            nested: Vec::new(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }
}

impl Options {
    /// Sets [`forced`](Self::forced).
    #[must_use]
    pub fn forced(mut self, forced: bool) -> Self {
        self.forced = forced;
        self
    }

    /// Sets [`strict`](Self::strict).
    #[must_use]
    pub fn strict(mut self, strict: bool) -> Self {
        self.strict = strict;
        self
    }

    /// Adds a field to [`nested`](Self::nested).
    #[must_use]
    pub fn nested(mut self, field: impl Into<String>) -> Self {
        self.nested.push(field.into());
        self
    }

    /// Sets [`controller`](Self::controller).
    #[must_use]
    pub fn controller(mut self, controller: Option<bool>) -> Self {
        self.controller = controller;
        self
    }

    /// Sets [`block_owner_deletion`](Self::block_owner_deletion).
    #[must_use]
    pub fn block_owner_deletion(mut self, block: Option<bool>) -> Self {
        self.block_owner_deletion = block;
        self
    }
}

/// Makes the owner own the children (Kopf's `kopf.append_owner_reference`): appends to
/// their `metadata.ownerReferences` a reference to it (`apiVersion`, `kind`, `name`, `uid`,
/// `controller: true`, `blockOwnerDeletion: true`), unless one with its uid is there already.
///
/// Kubernetes then deletes the children when the owner is deleted. An owner must be in the
/// children's namespace, or cluster-scoped.
///
/// ```
/// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
/// use k8s_openapi::api::core::v1::Pod;
///
/// let mut pods = vec![Pod::default(), Pod::default()];
/// kopf::hierarchies::append_owner_reference(&mut pods, invocation.body())?;
/// # Ok(None)
/// # }
/// ```
pub fn append_owner_reference<CF, OF>(
    objs: impl Children<CF>,
    owner: &impl Owner<OF>,
) -> Result<(), HierarchyError> {
    append_owner_reference_with(objs, owner, &Options::default())
}

/// As [`append_owner_reference`], with the reference's `controller` and
/// `blockOwnerDeletion` from the [`Options`] (Kopf's keyword arguments of the same names).
pub fn append_owner_reference_with<CF, OF>(
    objs: impl Children<CF>,
    owner: &impl Owner<OF>,
    options: &Options,
) -> Result<(), HierarchyError> {
    let owner = owner.facts()?;
    objs.visit(&mut |mut child| child.append_owner_reference(&owner, options))
}

/// The owner reference to the owner (Kopf's `kopf.build_owner_reference`): its `apiVersion`,
/// `kind`, `name`, `uid`, with `controller: true` and `blockOwnerDeletion: true`, as
/// [`append_owner_reference`] adds it to children. For children made by other means, such as
/// a typed object's own field or a server-side apply.
///
/// Kopf leaves out what the body lacks; an owner reference without one of those fields is
/// refused by the API server, so here it is an error ([`HierarchyError::IncompleteOwner`]).
///
/// ```
/// let owner = serde_json::json!({
///     "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
///     "metadata": {"name": "db", "namespace": "ns", "uid": "u1"},
/// });
/// let reference = kopf::hierarchies::build_owner_reference(&owner)?;
/// assert_eq!(reference.uid, "u1");
/// assert_eq!(reference.controller, Some(true));
/// assert_eq!(reference.block_owner_deletion, Some(true));
/// # Ok::<(), kopf::hierarchies::HierarchyError>(())
/// ```
pub fn build_owner_reference<OF>(owner: &impl Owner<OF>) -> Result<OwnerReference, HierarchyError> {
    build_owner_reference_with(owner, &Options::default())
}

/// As [`build_owner_reference`], with the reference's `controller` and `blockOwnerDeletion`
/// from the [`Options`] (Kopf's keyword arguments of the same names; `None` leaves one out).
pub fn build_owner_reference_with<OF>(
    owner: &impl Owner<OF>,
    options: &Options,
) -> Result<OwnerReference, HierarchyError> {
    let owner = owner.facts()?;
    Ok(OwnerReference {
        api_version: owner.api_version,
        kind: owner.kind,
        name: owner.name,
        uid: owner.uid,
        controller: options.controller,
        block_owner_deletion: options.block_owner_deletion,
    })
}

/// A reference to an object (Kopf's `kopf.build_object_reference`, what Events name as their
/// `involvedObject`): its `apiVersion`, `kind`, `name`, `uid` and `namespace`, each only if
/// the body has it (not empty), as in Kopf: a cluster-scoped object has no namespace, and a
/// body may lack its `apiVersion`. For a typed object, kube's
/// [`Resource::object_ref`](kube::Resource::object_ref) does the same.
///
/// ```
/// let body = serde_json::json!({
///     "apiVersion": "kopf.dev/v1", "kind": "KopfExample",
///     "metadata": {"name": "kex", "namespace": "ns", "uid": "u1"},
/// });
/// let reference = kopf::hierarchies::build_object_reference(&body);
/// assert_eq!(reference.name.as_deref(), Some("kex"));
/// assert_eq!(reference.namespace.as_deref(), Some("ns"));
/// assert_eq!(reference.field_path, None);
/// ```
pub fn build_object_reference(body: &Value) -> ObjectReference {
    let meta = &body["metadata"];
    ObjectReference {
        api_version: text(&body["apiVersion"]),
        kind: text(&body["kind"]),
        name: text(&meta["name"]),
        uid: text(&meta["uid"]),
        namespace: text(&meta["namespace"]),
        ..ObjectReference::default()
    }
}

/// Makes the owner not own the children any more (Kopf's `kopf.remove_owner_reference`):
/// removes from their `metadata.ownerReferences` the references with the owner's uid.
///
/// ```
/// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
/// let mut child = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap"});
/// kopf::hierarchies::append_owner_reference(&mut child, invocation.body())?;
/// kopf::hierarchies::remove_owner_reference(&mut child, invocation.body())?;
/// assert_eq!(child["metadata"]["ownerReferences"], serde_json::json!([]));
/// # Ok(None)
/// # }
/// ```
pub fn remove_owner_reference<CF, OF>(
    objs: impl Children<CF>,
    owner: &impl Owner<OF>,
) -> Result<(), HierarchyError> {
    let owner = owner.facts()?;
    objs.visit(&mut |mut child| child.remove_owner_reference(&owner.uid))
}

/// Labels the children (Kopf's `kopf.label`): adds the labels to their `metadata.labels`;
/// a label the child has already keeps its value unless `forced`.
///
/// ```
/// let mut child = serde_json::json!({"metadata": {"labels": {"tier": "cache"}}});
/// kopf::hierarchies::label(&mut child, [("app", "db"), ("tier", "storage")], false)?;
/// assert_eq!(child["metadata"]["labels"], serde_json::json!({"tier": "cache", "app": "db"}));
/// kopf::hierarchies::label(&mut child, [("tier", "storage")], true)?;
/// assert_eq!(child["metadata"]["labels"]["tier"], "storage");
/// # Ok::<(), kopf::hierarchies::HierarchyError>(())
/// ```
pub fn label<CF, K, V>(
    objs: impl Children<CF>,
    labels: impl IntoIterator<Item = (K, V)>,
    forced: bool,
) -> Result<(), HierarchyError>
where
    K: Into<String>,
    V: Into<String>,
{
    label_with(objs, labels, &Options::default().forced(forced))
}

/// As [`label`], with `forced` and `nested` from the [`Options`]: the objects in the
/// children's `nested` fields (such as a Deployment's `spec.template`) are labelled too.
///
/// ```
/// use kopf::hierarchies::{self, Options};
///
/// let mut job = serde_json::json!({"spec": {"jobTemplate": {"spec": {}}}});
/// let options = Options::default().nested("spec.jobTemplate").nested("spec.absent");
/// hierarchies::label_with(&mut job, [("app", "db")], &options)?;
/// assert_eq!(job["metadata"]["labels"]["app"], "db");
/// assert_eq!(job["spec"]["jobTemplate"]["metadata"]["labels"]["app"], "db");
/// # Ok::<(), kopf::hierarchies::HierarchyError>(())
/// ```
pub fn label_with<CF, K, V>(
    objs: impl Children<CF>,
    labels: impl IntoIterator<Item = (K, V)>,
    options: &Options,
) -> Result<(), HierarchyError>
where
    K: Into<String>,
    V: Into<String>,
{
    let labels: Vec<(String, String)> = labels
        .into_iter()
        .map(|(key, value)| (key.into(), value.into()))
        .collect();
    objs.visit(&mut |mut child| child.label(&labels, options))
}

/// Names the children after `name` (Kopf's `kopf.harmonize_naming`), if they have neither a
/// `metadata.name` nor a `metadata.generateName`: by default (not `strict`) with
/// `generateName: "<name>-"`, so that Kubernetes adds a random suffix and many children can
/// be named after one parent; if `strict`, with `name: "<name>"` exactly.
///
/// Children with a name of their own keep it, unless [`harmonize_naming_with`] is `forced`.
///
/// ```
/// let mut children = [serde_json::json!({}), serde_json::json!({"metadata": {"name": "mine"}})];
/// kopf::hierarchies::harmonize_naming(&mut children, "parent", false)?;
/// assert_eq!(children[0]["metadata"]["generateName"], "parent-");
/// assert_eq!(children[1]["metadata"]["name"], "mine");
/// # Ok::<(), kopf::hierarchies::HierarchyError>(())
/// ```
pub fn harmonize_naming<CF>(
    objs: impl Children<CF>,
    name: &str,
    strict: bool,
) -> Result<(), HierarchyError> {
    harmonize_naming_with(objs, name, &Options::default().strict(strict))
}

/// As [`harmonize_naming`], with `strict` and `forced` from the [`Options`]: `forced` names
/// the children even if they have a name or a `generateName` (and removes the other one).
///
/// ```
/// use kopf::hierarchies::{self, Options};
///
/// let mut child = serde_json::json!({"metadata": {"generateName": "mine-"}});
/// hierarchies::harmonize_naming_with(&mut child, "parent", &Options::default().forced(true).strict(true))?;
/// assert_eq!(child["metadata"], serde_json::json!({"name": "parent"}));
/// # Ok::<(), kopf::hierarchies::HierarchyError>(())
/// ```
pub fn harmonize_naming_with<CF>(
    objs: impl Children<CF>,
    name: &str,
    options: &Options,
) -> Result<(), HierarchyError> {
    objs.visit(&mut |mut child| child.harmonize_naming(name, options))
}

/// Puts the children into `namespace` (Kopf's `kopf.adjust_namespace`): sets their
/// `metadata.namespace` if they have none, or always if `forced`.
///
/// `None` (the namespace of a cluster-scoped owner) leaves the children's namespace as it is,
/// or, if `forced`, removes it. So the namespaced children of a cluster-scoped owner keep
/// what the handler chose, and otherwise go to the namespace of the client creating them.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
///
/// let mut child = ConfigMap::default();
/// kopf::hierarchies::adjust_namespace(&mut child, Some("default"), false)?;
/// assert_eq!(child.metadata.namespace.as_deref(), Some("default"));
/// # Ok::<(), kopf::hierarchies::HierarchyError>(())
/// ```
pub fn adjust_namespace<CF>(
    objs: impl Children<CF>,
    namespace: Option<&str>,
    forced: bool,
) -> Result<(), HierarchyError> {
    objs.visit(&mut |mut child| child.adjust_namespace(namespace, forced))
}

/// Adopts the children (Kopf's `kopf.adopt`): makes the owner own them
/// ([`append_owner_reference`]), names them after it ([`harmonize_naming`], not strict),
/// puts them into its namespace ([`adjust_namespace`], none for a cluster-scoped owner) and
/// gives them its labels ([`label`]); what the children have already is kept.
///
/// For an exact name rather than a generated one, name the children first (or call
/// [`harmonize_naming`] with `strict`): adopting keeps their names.
///
/// ```
/// # async fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use kube::api::{Api, PostParams};
///
/// let mut child = ConfigMap {
///     data: Some([("greeting".to_string(), "hello".to_string())].into()),
///     ..ConfigMap::default()
/// };
/// kopf::hierarchies::adopt(&mut child, invocation.body())?;
/// let namespace = child.metadata.namespace.clone().unwrap_or_default();
/// let api: Api<ConfigMap> = Api::namespaced(invocation.client().clone(), &namespace);
/// let created = api.create(&PostParams::default(), &child).await?;
/// kopf::info(invocation.body(), "Created", format_args!("the config map {}", created.metadata.name.unwrap_or_default()));
/// # Ok(None)
/// # }
/// ```
pub fn adopt<CF, OF>(
    objs: impl Children<CF>,
    owner: &impl Owner<OF>,
) -> Result<(), HierarchyError> {
    adopt_with(objs, owner, &Options::default())
}

/// As [`adopt`], with the [`Options`] (Kopf's `adopt(objs, owner, forced=, strict=,
/// nested=)`): `forced` replaces the children's names, namespaces and labels; `strict`
/// names them exactly after the owner; `nested` labels nested objects too. The owner
/// reference's `controller` and `block_owner_deletion` apply as well (Kopf's `adopt`
/// always sets them).
pub fn adopt_with<CF, OF>(
    objs: impl Children<CF>,
    owner: &impl Owner<OF>,
    options: &Options,
) -> Result<(), HierarchyError> {
    let owner = owner.facts()?;
    let labels: Vec<(String, String)> = owner.labels.clone().into_iter().collect();
    objs.visit(&mut |mut child| {
        child.append_owner_reference(&owner, options)?;
        child.harmonize_naming(&owner.name, options)?;
        child.adjust_namespace(owner.namespace.as_deref(), options.forced)?;
        child.label(&labels, options)
    })
}

/// Adopts the children (as [`adopt`] does) to the object of the handler running now, as Kopf's
/// `kopf.adopt(objs)` does without an owner.
///
/// It works within a handler of an object: an async handler's attempt, or a sync handler's run.
/// Anywhere else (including tasks or threads that a handler spawns), it is
/// [`HierarchyError::NoCurrentObject`]; pass the owner to [`adopt`] there.
///
/// ```
/// # fn handler(invocation: kopf::Invocation) -> kopf::registry::HandlerResult {
/// let mut child = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap"});
/// kopf::hierarchies::adopt_to_current(&mut child)?;
/// assert_eq!(child["metadata"]["ownerReferences"][0]["uid"], invocation.uid());
/// # Ok(None)
/// # }
/// ```
pub fn adopt_to_current<CF>(objs: impl Children<CF>) -> Result<(), HierarchyError> {
    adopt(objs, &CurrentObject)
}

impl Child<'_> {
    fn append_owner_reference(
        &mut self,
        owner: &Facts,
        options: &Options,
    ) -> Result<(), HierarchyError> {
        match self {
            Child::Json(object) => {
                let references = json_array(json_metadata(object)?, "ownerReferences")?;
                if !references.iter().any(|r| r["uid"] == *owner.uid) {
                    // In Kopf's order of keys, without those that are `None` (as Kopf's).
                    let mut reference = Map::new();
                    if let Some(controller) = options.controller {
                        reference.insert("controller".into(), controller.into());
                    }
                    if let Some(block) = options.block_owner_deletion {
                        reference.insert("blockOwnerDeletion".into(), block.into());
                    }
                    reference.insert("apiVersion".into(), owner.api_version.clone().into());
                    reference.insert("kind".into(), owner.kind.clone().into());
                    reference.insert("name".into(), owner.name.clone().into());
                    reference.insert("uid".into(), owner.uid.clone().into());
                    references.push(Value::Object(reference));
                }
            }
            Child::Typed(meta) => {
                let references = meta.owner_references.get_or_insert_default();
                if !references.iter().any(|r| r.uid == owner.uid) {
                    references.push(OwnerReference {
                        api_version: owner.api_version.clone(),
                        kind: owner.kind.clone(),
                        name: owner.name.clone(),
                        uid: owner.uid.clone(),
                        controller: options.controller,
                        block_owner_deletion: options.block_owner_deletion,
                    });
                }
            }
        }
        Ok(())
    }

    fn remove_owner_reference(&mut self, uid: &str) -> Result<(), HierarchyError> {
        match self {
            Child::Json(object) => {
                let references = json_array(json_metadata(object)?, "ownerReferences")?;
                references.retain(|r| r["uid"] != uid);
            }
            Child::Typed(meta) => {
                if let Some(references) = &mut meta.owner_references {
                    references.retain(|r| r.uid != uid);
                }
            }
        }
        Ok(())
    }

    fn label(
        &mut self,
        labels: &[(String, String)],
        options: &Options,
    ) -> Result<(), HierarchyError> {
        let forced = options.forced;
        let put = |object: &mut Map<String, Value>| -> Result<(), HierarchyError> {
            let existing = json_object(json_metadata(object)?, "labels")?;
            for (key, value) in labels {
                if forced || !existing.contains_key(key) {
                    existing.insert(key.clone(), value.clone().into());
                }
            }
            Ok(())
        };
        match self {
            Child::Json(object) => {
                put(object)?;
                for field in &options.nested {
                    match resolve_mut(object, field) {
                        None => {} // Absent: skipped, as Kopf skips it.
                        Some(Value::Object(nested)) => put(nested)?,
                        Some(other) => {
                            return Err(HierarchyError::MalformedNested {
                                field: field.clone(),
                                found: describe(other),
                            });
                        }
                    }
                }
            }
            Child::Typed(_) if !options.nested.is_empty() => {
                return Err(HierarchyError::NestedInTyped {
                    field: options.nested[0].clone(),
                });
            }
            Child::Typed(meta) => {
                let existing = meta.labels.get_or_insert_default();
                for (key, value) in labels {
                    if forced || !existing.contains_key(key) {
                        existing.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        Ok(())
    }

    fn harmonize_naming(&mut self, name: &str, options: &Options) -> Result<(), HierarchyError> {
        let Options { forced, strict, .. } = *options;
        match self {
            Child::Json(object) => {
                let meta = json_metadata(object)?;
                let named = |key| meta.get(key).is_some_and(|v| !v.is_null());
                if !forced && (named("name") || named("generateName")) {
                    return Ok(());
                }
                meta.remove("name");
                meta.remove("generateName");
                if strict {
                    meta.insert("name".into(), name.into());
                } else {
                    meta.insert("generateName".into(), format!("{name}-").into());
                }
            }
            Child::Typed(meta) => {
                if !forced && (meta.name.is_some() || meta.generate_name.is_some()) {
                    return Ok(());
                }
                if strict {
                    meta.name = Some(name.to_string());
                    meta.generate_name = None;
                } else {
                    meta.generate_name = Some(format!("{name}-"));
                    meta.name = None;
                }
            }
        }
        Ok(())
    }

    fn adjust_namespace(
        &mut self,
        namespace: Option<&str>,
        forced: bool,
    ) -> Result<(), HierarchyError> {
        match self {
            Child::Json(object) => {
                let meta = json_metadata(object)?;
                if forced || meta.get("namespace").is_none_or(Value::is_null) {
                    match namespace {
                        Some(namespace) => meta.insert("namespace".into(), namespace.into()),
                        None => meta.remove("namespace"),
                    };
                }
            }
            Child::Typed(meta) => {
                if forced || meta.namespace.is_none() {
                    meta.namespace = namespace.map(String::from);
                }
            }
        }
        Ok(())
    }
}

/// The value at a dotted path (`spec.template`) in an object, if every step is there.
fn resolve_mut<'a>(object: &'a mut Map<String, Value>, field: &str) -> Option<&'a mut Value> {
    let mut steps = field.split('.');
    let mut value = object.get_mut(steps.next()?)?;
    for step in steps {
        value = value.as_object_mut()?.get_mut(step)?;
    }
    Some(value)
}

/// The child's `metadata`, made if absent.
fn json_metadata(
    object: &mut Map<String, Value>,
) -> Result<&mut Map<String, Value>, HierarchyError> {
    json_object(object, "metadata")
}

/// `object[key]` as an object, made if absent or null.
fn json_object<'a>(
    object: &'a mut Map<String, Value>,
    key: &'static str,
) -> Result<&'a mut Map<String, Value>, HierarchyError> {
    let value = object.entry(key).or_insert(Value::Null);
    if value.is_null() {
        *value = Value::Object(Map::new());
    }
    let found = describe(value);
    value
        .as_object_mut()
        .ok_or_else(|| malformed(key, "an object", found))
}

/// `object[key]` as an array, made if absent or null.
fn json_array<'a>(
    object: &'a mut Map<String, Value>,
    key: &'static str,
) -> Result<&'a mut Vec<Value>, HierarchyError> {
    let value = object.entry(key).or_insert(Value::Null);
    if value.is_null() {
        *value = Value::Array(Vec::new());
    }
    let found = describe(value);
    value
        .as_array_mut()
        .ok_or_else(|| malformed(key, "an array", found))
}

fn malformed(key: &'static str, expected: &'static str, found: &'static str) -> HierarchyError {
    let field = match key {
        "metadata" => "metadata",
        "labels" => "metadata.labels",
        "ownerReferences" => "metadata.ownerReferences",
        other => other,
    };
    HierarchyError::MalformedChild {
        field,
        expected,
        found,
    }
}

fn text(value: &Value) -> Option<String> {
    value.as_str().filter(|v| !v.is_empty()).map(String::from)
}

fn describe(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests;
