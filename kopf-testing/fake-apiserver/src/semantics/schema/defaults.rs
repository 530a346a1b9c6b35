//! Defaulting: `default` values where fields are absent, pruned against their own schema.

use serde_json::Value;

use super::keywords::{
    Additional, MAX_DEPTH, additional, default_of, is_meta, is_true, items_schema, prop, props,
};
use super::prune::prune_node;

/// Applies `default` values from the schema, in place, where the field is absent (and, as Kubernetes does, where it is null only if `nullable` is false). Defaults inside defaults are applied too; defaulting happens before validation.
///
/// Default values are pruned against their own schema before they are inserted. The
/// root's apiVersion, kind and metadata are left alone.
pub(crate) fn apply_defaults(object: &mut Value, schema: &Value) {
    default_node(object, schema, true, 0);
}

/// Applies defaults below one value (k8s' structural defaulting algorithm).
fn default_node(x: &mut Value, s: &Value, root: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => {
            if let Some(ps) = props(s) {
                for (k, p) in ps {
                    if root && is_meta(k) {
                        continue;
                    }
                    let Some(d) = default_of(p) else { continue };
                    let missing = match map.get(k) {
                        None => true,
                        Some(Value::Null) => !is_true(p, "nullable"),
                        Some(_) => false,
                    };
                    if missing {
                        map.insert(k.clone(), pruned_default(d, p));
                    }
                }
            }
            let addl = additional(s);
            for (k, v) in map.iter_mut() {
                if root && is_meta(k) {
                    continue;
                }
                if let Some(p) = prop(s, k) {
                    default_node(v, p, false, depth + 1);
                } else if let Additional::Schema(a) = addl {
                    if v.is_null()
                        && !is_true(a, "nullable")
                        && let Some(d) = default_of(a)
                    {
                        *v = pruned_default(d, a);
                    }
                    default_node(v, a, false, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(it) = items_schema(s) {
                for v in items.iter_mut() {
                    if v.is_null()
                        && !is_true(it, "nullable")
                        && let Some(d) = default_of(it)
                    {
                        *v = pruned_default(d, it);
                    }
                    default_node(v, it, false, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// A copy of a default value, pruned against its schema (as the apiserver prunes defaults).
pub(super) fn pruned_default(d: &Value, s: &Value) -> Value {
    let mut value = d.clone();
    let mut sink = Vec::new();
    prune_node(&mut value, Some(s), false, "", &mut sink, 0);
    value
}
