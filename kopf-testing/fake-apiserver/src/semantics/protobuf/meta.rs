//! The schemas of `k8s.io/apimachinery/pkg/apis/meta/v1`: ObjectMeta and what it holds, label
//! selectors.

use super::schema::Kind::{Bool, Int64, Message, String as Str};
use super::schema::{Kind, Schema, keep, omit, rep};

// --- k8s.io/apimachinery/pkg/apis/meta/v1 ---

/// meta/v1 ObjectMeta.
pub(crate) static OBJECT_META: Schema = Schema {
    name: "ObjectMeta",
    fields: &[
        omit(1, "name", Str),
        omit(2, "generateName", Str),
        omit(3, "namespace", Str),
        omit(4, "selfLink", Str),
        omit(5, "uid", Str),
        omit(6, "resourceVersion", Str),
        omit(7, "generation", Int64),
        keep(8, "creationTimestamp", Kind::Time),
        keep(9, "deletionTimestamp", Kind::Time),
        keep(10, "deletionGracePeriodSeconds", Int64),
        keep(11, "labels", Kind::StringMap),
        keep(12, "annotations", Kind::StringMap),
        rep(13, "ownerReferences", Message(&OWNER_REFERENCE)),
        rep(14, "finalizers", Str),
        rep(17, "managedFields", Message(&MANAGED_FIELDS_ENTRY)),
    ],
};

/// meta/v1 OwnerReference.
pub(crate) static OWNER_REFERENCE: Schema = Schema {
    name: "OwnerReference",
    fields: &[
        keep(5, "apiVersion", Str),
        keep(1, "kind", Str),
        keep(3, "name", Str),
        keep(4, "uid", Str),
        keep(6, "controller", Bool),
        keep(7, "blockOwnerDeletion", Bool),
    ],
};

/// meta/v1 ManagedFieldsEntry.
pub(crate) static MANAGED_FIELDS_ENTRY: Schema = Schema {
    name: "ManagedFieldsEntry",
    fields: &[
        omit(1, "manager", Str),
        omit(2, "operation", Str),
        omit(3, "apiVersion", Str),
        keep(4, "time", Kind::Time),
        omit(6, "fieldsType", Str),
        keep(7, "fieldsV1", Kind::FieldsV1),
        omit(8, "subresource", Str),
    ],
};

/// meta/v1 LabelSelector.
pub(crate) static LABEL_SELECTOR: Schema = Schema {
    name: "LabelSelector",
    fields: &[
        keep(1, "matchLabels", Kind::StringMap),
        rep(2, "matchExpressions", Message(&LABEL_SELECTOR_REQUIREMENT)),
    ],
};

/// meta/v1 LabelSelectorRequirement.
pub(crate) static LABEL_SELECTOR_REQUIREMENT: Schema = Schema {
    name: "LabelSelectorRequirement",
    fields: &[
        keep(1, "key", Str),
        keep(2, "operator", Str),
        rep(3, "values", Str),
    ],
};
