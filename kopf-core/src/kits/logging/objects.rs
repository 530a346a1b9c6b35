//! What a span says of its object: the name and namespace that plain and full lines show.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;

use crate::helpers::joined::Joined;

/// Of a span's fields, the object's name and namespace: all that plain and full lines show of
/// them (the others are not formatted at all). One text holds both, the namespace first, kept
/// in place when short: a handler's span then costs no allocation for its object besides the
/// span's extension itself.
#[derive(Debug, Default)]
pub(super) struct ObjectPath {
    text: PathText,
    /// Where the namespace ends in `text`, if one was recorded.
    namespace: Option<usize>,
    /// Whether a name was recorded (after the namespace in `text`).
    pub(super) named: bool,
}

impl ObjectPath {
    /// The object these fields name, if they name one.
    pub(super) fn recorded(fields: &impl RecordFields) -> Option<ObjectPath> {
        let mut object = ObjectPath::default();
        fields.record(&mut object);
        (object.namespace.is_some() || object.named).then_some(object)
    }

    /// The name and the namespace, if recorded.
    pub(super) fn parts(&self) -> (Option<&str>, Option<&str>) {
        let text = self.text.as_str();
        let (namespace, name) = text.split_at(self.namespace.unwrap_or(0));
        (
            self.named.then_some(name),
            self.namespace.is_some().then_some(namespace),
        )
    }

    /// Whether a namespace was recorded.
    pub(super) fn is_namespaced(&self) -> bool {
        self.namespace.is_some()
    }

    pub(super) fn name(&self) -> Option<&str> {
        self.parts().0
    }

    pub(super) fn namespace(&self) -> Option<&str> {
        self.parts().1
    }

    fn set_name(&mut self, name: &str) {
        let namespace = self.namespace().unwrap_or_default();
        self.text = PathText::joined(namespace, name);
        self.named = true;
    }

    fn set_namespace(&mut self, namespace: &str) {
        let name = self.name().unwrap_or_default();
        self.text = PathText::joined(namespace, name);
        self.namespace = Some(namespace.len());
    }
}

impl Visit for ObjectPath {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if matches!(field.name(), "object.name" | "object.namespace") {
            self.record_str(field, &format!("{value:?}"));
        }
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "object.name" => self.set_name(value),
            "object.namespace" => self.set_namespace(value),
            _ => {}
        }
    }
}

/// How many bytes of namespace and name are kept in place: most objects' fit (a namespace and a
/// generated name), and the whole path stays a small allocation, quick to free.
const INLINE: usize = 64;

/// Two texts joined: kept in place when short, on the heap otherwise.
enum PathText {
    Inline(Joined<INLINE>),
    Heap(String),
}

impl Default for PathText {
    fn default() -> PathText {
        PathText::joined("", "")
    }
}

impl PathText {
    fn joined(first: &str, second: &str) -> PathText {
        match Joined::new(&[first, second]) {
            Some(joined) => PathText::Inline(joined),
            None => PathText::Heap([first, second].concat()),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            PathText::Inline(joined) => joined.as_str(),
            PathText::Heap(text) => text,
        }
    }
}

impl fmt::Debug for PathText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_keeps_its_parts_in_place_or_on_the_heap_as_long_as_they_are() {
        for (namespace, name) in [
            ("ns", "one"),
            ("", "cluster-wide"),
            ("ünïcödé", "ñame"),
            (
                "namespace-of-sixty-three-characters-which-is-the-longest-it-gets",
                "a-name",
            ),
            (&*"n".repeat(40), &*"m".repeat(24)),
            (&*"n".repeat(40), &*"m".repeat(25)),
        ] {
            let mut object = ObjectPath::default();
            object.set_name(name);
            object.set_namespace(namespace);
            assert_eq!(object.name(), Some(name));
            assert_eq!(object.namespace(), Some(namespace));
            object.set_name("renamed");
            assert_eq!(object.name(), Some("renamed"));
            assert_eq!(object.namespace(), Some(namespace));
            let inline = matches!(object.text, PathText::Inline { .. });
            assert_eq!(inline, namespace.len() + "renamed".len() <= INLINE);
        }
    }
}
