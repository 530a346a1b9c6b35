//! Pruning: fields a schema does not name are dropped, and nulls it does not allow.

use serde_json::Value;

use super::keywords::{
    Additional, EMBEDDED, MAX_DEPTH, PRESERVE, additional, child, default_of, field_schema, index,
    is_meta, is_true, items_schema, prop,
};

/// Drops fields not in the schema, in place (honouring x-kubernetes-preserve-unknown-fields at any level, additionalProperties for maps, items for arrays, x-kubernetes-embedded-resource keeping apiVersion/kind/metadata). At the root, apiVersion, kind and metadata are never pruned (metadata is the server's business). Returns the dotted paths of pruned fields (used for fieldValidation=Strict/Warn: "unknown field \"spec.foo\"").
///
/// As the apiserver does right after pruning, null values of non-nullable fields without
/// a default are dropped too (they are not reported). `additionalProperties: false`
/// drops the unnamed fields even under x-kubernetes-preserve-unknown-fields, so that
/// [`validate`] never reports them as forbidden afterwards.
pub(crate) fn prune(object: &mut Value, schema: &Value) -> Vec<String> {
    let mut unknown = Vec::new();
    prune_node(object, Some(schema), true, "", &mut unknown, 0);
    drop_null_fields(object, Some(schema), true, 0);
    unknown.sort();
    unknown.dedup();
    unknown
}

/// Prunes one value against its schema (`None`: no schema, as k8s' nil), recording paths.
pub(super) fn prune_node(
    x: &mut Value,
    s: Option<&Value>,
    root: bool,
    path: &str,
    unknown: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(s) = s
        && is_true(s, PRESERVE)
    {
        skip_prune(x, s, root, path, unknown, depth);
        return;
    }
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                unknown.extend(map.keys().map(|k| child(path, k)));
                map.clear();
                return;
            };
            let embedded = root || is_true(s, EMBEDDED);
            let addl = additional(s);
            map.retain(|k, v| {
                if embedded && is_meta(k) {
                    return true;
                }
                let p = child(path, k);
                if let Some(ps) = prop(s, k) {
                    prune_node(v, Some(ps), false, &p, unknown, depth + 1);
                    return true;
                }
                match addl {
                    Additional::Schema(a) => {
                        prune_node(v, Some(a), false, &p, unknown, depth + 1);
                        true
                    }
                    Additional::Allows(true) => {
                        prune_node(v, None, false, &p, unknown, depth + 1);
                        true
                    }
                    _ => {
                        unknown.push(p);
                        false
                    }
                }
            });
        }
        Value::Array(items) => {
            let it = s.and_then(items_schema);
            for (i, v) in items.iter_mut().enumerate() {
                prune_node(v, it, false, &index(path, i), unknown, depth + 1);
            }
        }
        _ => {}
    }
}

/// Walks a value under x-kubernetes-preserve-unknown-fields: unknown fields stay, known ones are pruned.
fn skip_prune(
    x: &mut Value,
    s: &Value,
    root: bool,
    path: &str,
    unknown: &mut Vec<String>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => {
            let embedded = root || is_true(s, EMBEDDED);
            let addl = additional(s);
            map.retain(|k, v| {
                if embedded && is_meta(k) {
                    return true;
                }
                let p = child(path, k);
                if let Some(ps) = prop(s, k) {
                    prune_node(v, Some(ps), false, &p, unknown, depth + 1);
                    return true;
                }
                match addl {
                    Additional::Schema(a) => {
                        prune_node(v, Some(a), false, &p, unknown, depth + 1);
                        true
                    }
                    Additional::Allows(true) => {
                        prune_node(v, None, false, &p, unknown, depth + 1);
                        true
                    }
                    Additional::Allows(false) => {
                        unknown.push(p);
                        false
                    }
                    Additional::Absent => true,
                }
            });
        }
        Value::Array(items) => {
            if let Some(it) = items_schema(s) {
                for (i, v) in items.iter_mut().enumerate() {
                    skip_prune(v, it, false, &index(path, i), unknown, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// Drops null fields whose schema is neither nullable nor defaulted (k8s' PruneNonNullableNullsWithoutDefaults).
fn drop_null_fields(x: &mut Value, s: Option<&Value>, root: bool, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => map.retain(|k, v| {
            if root && is_meta(k) {
                return true;
            }
            let sub = s.and_then(|s| field_schema(s, k));
            if v.is_null()
                && let Some(sub) = sub
                && !is_true(sub, "nullable")
                && default_of(sub).is_none()
            {
                return false;
            }
            drop_null_fields(v, sub, false, depth + 1);
            true
        }),
        Value::Array(items) => {
            let it = s.and_then(items_schema);
            for v in items.iter_mut() {
                drop_null_fields(v, it, false, depth + 1);
            }
        }
        _ => {}
    }
}
