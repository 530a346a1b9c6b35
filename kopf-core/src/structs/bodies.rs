//! An object as the operator keeps it: its JSON, with `metadata.managedFields` kept apart as
//! the text it was read as, and built only when something asks for the whole object.
//!
//! Server-side apply records which manager owns which fields in `metadata.managedFields`: a
//! tree of field names per manager and operation, often the larger part of a small object,
//! and a map of many small keys, the costliest JSON to build and to free. The engine never
//! reads it (causes, diffs, filters and progress are elsewhere in the object), and most
//! handlers never do either; every event of every object would build it, and most would
//! only free it. A handler that asks for the whole object ([`Body::whole`]) gets it as read,
//! in its place among `metadata`'s keys, built once per body.

use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

use serde_json::Value;
use serde_json::value::RawValue;

/// An object: [`Deref`]s to its JSON without `metadata.managedFields` when that is kept
/// apart (everything the engine reads); [`Body::whole`] is the object as read.
#[derive(Clone, Default)]
pub(crate) struct Body {
    value: Value,
    /// Boxed: a body with nothing apart (stripped, or built here) is no larger than its value.
    apart: Option<Box<Apart>>,
}

/// What is kept apart, and the whole object once built.
#[derive(Clone)]
struct Apart {
    managed: Managed,
    whole: OnceLock<Value>,
}

impl Apart {
    fn new(managed: Managed) -> Box<Apart> {
        Box::new(Apart {
            managed,
            whole: OnceLock::new(),
        })
    }
}

/// `metadata.managedFields` as read, and its place among `metadata`'s keys.
#[derive(Clone)]
pub(crate) struct Managed {
    text: Box<RawValue>,
    position: usize,
}

impl Managed {
    /// The JSON text of `metadata.managedFields`, which was the `position`-th key of
    /// `metadata` (counted from 0).
    pub(crate) fn new(text: Box<RawValue>, position: usize) -> Managed {
        Managed { text, position }
    }
}

impl Body {
    /// An object read with its `metadata.managedFields` (if it had any) kept apart: `value`
    /// is the rest of it.
    pub(crate) fn with_managed(value: Value, managed: Option<Managed>) -> Body {
        Body {
            value,
            apart: managed.map(Apart::new),
        }
    }

    /// The whole object, `metadata.managedFields` included, as it was read.
    pub(crate) fn whole(&self) -> &Value {
        let Some(Apart { managed, whole }) = self.apart.as_deref() else {
            return &self.value;
        };
        whole.get_or_init(|| {
            let mut whole = self.value.clone();
            if let Some(metadata) = whole.get_mut("metadata").and_then(Value::as_object_mut) {
                // The text is JSON that was read once already, so it reads again.
                let fields = serde_json::from_str(managed.text.get()).unwrap_or_default();
                let position = managed.position.min(metadata.len());
                metadata.shift_insert(position, "managedFields".into(), fields);
            }
            whole
        })
    }

    /// The object without what is kept apart (the same as dereferencing it).
    pub(crate) fn value(&self) -> &Value {
        &self.value
    }

    /// The same object with `value` for what is not kept apart (what is, is kept).
    pub(crate) fn replaced(&self, value: Value) -> Body {
        let managed = self.apart.as_ref().map(|apart| apart.managed.clone());
        Body::with_managed(value, managed)
    }

    /// The object without what is kept apart, to change (the whole object follows).
    pub(crate) fn value_mut(&mut self) -> &mut Value {
        if let Some(apart) = self.apart.as_deref_mut() {
            apart.whole = OnceLock::new();
        }
        &mut self.value
    }
}

impl Deref for Body {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.value
    }
}

/// An object whole, with nothing kept apart.
impl From<Value> for Body {
    fn from(value: Value) -> Body {
        Body::with_managed(value, None)
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.whole(), formatter)
    }
}

impl PartialEq<Value> for Body {
    fn eq(&self, other: &Value) -> bool {
        self.whole() == other
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn managed(text: &str, position: usize) -> Option<Managed> {
        let text = RawValue::from_string(text.into()).expect("valid JSON");
        Some(Managed::new(text, position))
    }

    #[test]
    fn the_whole_object_has_the_managed_fields_in_their_place() {
        let value = json!({"metadata": {"name": "a", "uid": "u"}, "spec": {"x": 1}});
        let body = Body::with_managed(value.clone(), managed(r#"[{"manager":"m"}]"#, 1));
        assert_eq!(*body.value(), value);
        assert_eq!(body["metadata"]["managedFields"], Value::Null);
        let whole = body.whole();
        assert_eq!(
            whole["metadata"]["managedFields"],
            json!([{"manager": "m"}])
        );
        let keys: Vec<_> = whole["metadata"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "managedFields", "uid"]);
        assert_eq!(whole["spec"], json!({"x": 1}));
        // Built once.
        assert!(std::ptr::eq(whole, body.whole()));
    }

    #[test]
    fn a_body_is_a_value_and_a_pointer() {
        assert_eq!(
            std::mem::size_of::<Body>(),
            std::mem::size_of::<Value>() + std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn a_changed_body_builds_its_whole_object_again() {
        let mut body = Body::with_managed(json!({"metadata": {}}), managed("[]", 0));
        assert_eq!(body.whole()["kind"], Value::Null);
        body.value_mut()["kind"] = json!("K");
        assert_eq!(
            *body.whole(),
            json!({"metadata": {"managedFields": []}, "kind": "K"})
        );
        let replaced = body.replaced(json!({"metadata": {"name": "n"}}));
        assert_eq!(
            *replaced.whole(),
            json!({"metadata": {"managedFields": [], "name": "n"}})
        );
    }

    #[test]
    fn a_body_with_nothing_apart_is_its_value() {
        let value = json!({"metadata": {"managedFields": []}});
        let body = Body::from(value.clone());
        assert!(std::ptr::eq(body.whole(), body.value()));
        assert_eq!(body, value);
        // A place past the end is the end; an object without metadata stays as it is.
        let late = Body::with_managed(json!({"metadata": {"a": 1}}), managed("[]", 9));
        let keys: Vec<_> = late.whole()["metadata"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(keys, ["a", "managedFields"]);
        let odd = Body::with_managed(json!({"metadata": "x"}), managed("[]", 0));
        assert_eq!(*odd.whole(), json!({"metadata": "x"}));
    }
}
