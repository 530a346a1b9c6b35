//! Field sets: structured-merge-diff paths and their FieldsV1 encoding.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// One path element, kept in its FieldsV1 text form (`f:name`, `k:{..}`, `v:..`, `i:3`);
/// ordered as structured-merge-diff orders them: fields, keys, values, indices.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Pe {
    /// 0 for a field, 1 for a key, 2 for a value, 3 for an index, 4 for an unkeyable item.
    pub(super) rank: u8,
    /// The FieldsV1 text, with canonical JSON for keys and values.
    text: String,
}

/// A field path.
pub(super) type FieldPath = Vec<Pe>;
/// A set of field paths.
pub(super) type FieldSet = BTreeSet<FieldPath>;

/// JSON text with object keys sorted, as structured-merge-diff writes keys and values.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = entries
                .into_iter()
                .map(|(key, value)| format!("{}:{}", Value::String(key.clone()), canonical(value)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", inner.join(","))
        }
        scalar => scalar.to_string(),
    }
}

/// Constructors, parsing and display of path elements.
impl Pe {
    /// A field name element.
    pub(super) fn field(name: &str) -> Pe {
        Pe {
            rank: 0,
            text: format!("f:{name}"),
        }
    }

    /// A keyed list item element.
    pub(super) fn key(fields: &Map<String, Value>) -> Pe {
        Pe {
            rank: 1,
            text: format!("k:{}", canonical(&Value::Object(fields.clone()))),
        }
    }

    /// A set item element.
    pub(super) fn value(value: &Value) -> Pe {
        Pe {
            rank: 2,
            text: format!("v:{}", canonical(value)),
        }
    }

    /// A list index element.
    pub(super) fn index(index: usize) -> Pe {
        Pe {
            rank: 3,
            text: format!("i:{index}"),
        }
    }

    /// A live list item that cannot be keyed: never matches anything applied.
    pub(super) fn unkeyable(index: usize) -> Pe {
        Pe {
            rank: 4,
            text: format!("#{index}"),
        }
    }

    /// Parses a FieldsV1 key, normalizing the JSON of keys and values.
    fn parse(text: &str) -> Option<Pe> {
        let (kind, rest) = (text.get(..2)?, text.get(2..)?);
        match kind {
            "f:" => Some(Pe::field(rest)),
            "k:" => match serde_json::from_str::<Value>(rest).ok()? {
                Value::Object(map) => Some(Pe::key(&map)),
                _ => None,
            },
            "v:" => Some(Pe::value(&serde_json::from_str::<Value>(rest).ok()?)),
            "i:" => Some(Pe::index(rest.parse().ok()?)),
            _ => None,
        }
    }

    /// The field name of a field element.
    pub(super) fn field_name(&self) -> Option<&str> {
        if self.rank == 0 {
            self.text.get(2..)
        } else {
            None
        }
    }

    /// The key fields of a key element.
    pub(super) fn key_fields(&self) -> Option<Map<String, Value>> {
        if self.rank != 1 {
            return None;
        }
        match serde_json::from_str::<Value>(self.text.get(2..)?).ok()? {
            Value::Object(map) => Some(map),
            _ => None,
        }
    }

    /// The element as structured-merge-diff prints it: `.name`, `[name="x"]`, `[="v"]`, `[3]`.
    pub(super) fn display(&self) -> String {
        let rest = self.text.get(2..).unwrap_or_default();
        match self.rank {
            0 => format!(".{rest}"),
            1 => {
                let fields = self.key_fields().unwrap_or_default();
                let mut parts: Vec<(String, String)> = fields
                    .iter()
                    .map(|(name, value)| (name.clone(), canonical(value)))
                    .collect();
                parts.sort();
                let inner: Vec<String> = parts
                    .into_iter()
                    .map(|(name, value)| format!("{name}={value}"))
                    .collect();
                format!("[{}]", inner.join(","))
            }
            2 => format!("[={rest}]"),
            3 => format!("[{rest}]"),
            _ => format!("[{}]", self.text),
        }
    }
}

/// A path as structured-merge-diff prints it, such as `.spec.containers[name="app"].image`.
pub(super) fn display_path(path: &[Pe]) -> String {
    path.iter().map(Pe::display).collect()
}

/// A node of the FieldsV1 tree.
#[derive(Default)]
struct Node {
    /// Whether the path to this node is in the set.
    member: bool,
    /// Child elements.
    children: BTreeMap<Pe, Node>,
}

/// Encodes a field set as a FieldsV1 object.
pub(super) fn encode_fields(set: &FieldSet) -> Value {
    let mut root = Node::default();
    for path in set {
        let mut node = &mut root;
        for pe in path {
            node = node.children.entry(pe.clone()).or_default();
        }
        node.member = true;
    }
    encode_node(&root, false)
}

/// Encodes one FieldsV1 node; `.` marks a member that also has children.
fn encode_node(node: &Node, include_self: bool) -> Value {
    let mut map = Map::new();
    if include_self && node.member && !node.children.is_empty() {
        map.insert(".".to_string(), Value::Object(Map::new()));
    }
    for (pe, child) in &node.children {
        let value = if child.children.is_empty() {
            Value::Object(Map::new())
        } else {
            encode_node(child, true)
        };
        map.insert(pe.text.clone(), value);
    }
    Value::Object(map)
}

/// Decodes a FieldsV1 object into `out`; `None` when it is malformed.
pub(super) fn decode_fields(
    value: &Value,
    prefix: &mut FieldPath,
    out: &mut FieldSet,
) -> Option<()> {
    let Value::Object(map) = value else {
        return None;
    };
    for (key, child) in map {
        if key == "." {
            if !prefix.is_empty() {
                out.insert(prefix.clone());
            }
            continue;
        }
        prefix.push(Pe::parse(key)?);
        let result = match child {
            Value::Object(inner) if inner.is_empty() => {
                out.insert(prefix.clone());
                Some(())
            }
            _ => decode_fields(child, prefix, out),
        };
        prefix.pop();
        result?;
    }
    Some(())
}

/// Every non-empty prefix of every path of `set`.
pub(super) fn closure<'a>(sets: impl IntoIterator<Item = &'a FieldSet>) -> FieldSet {
    let mut out = FieldSet::new();
    for set in sets {
        for path in set {
            for end in 1..=path.len() {
                if let Some(prefix) = path.get(..end) {
                    out.insert(prefix.to_vec());
                }
            }
        }
    }
    out
}
