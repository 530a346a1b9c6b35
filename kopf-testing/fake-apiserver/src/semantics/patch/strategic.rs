//! Kubernetes strategic merge patch.
//!
//! [`strategic_merge_patch`] follows `k8s.io/apimachinery/pkg/util/strategicpatch`
//! (`StrategicMergeMapPatch`), with the Go struct tags replaced by a static table of list
//! strategies per kind and field path (indices left out):
//!
//! | where | lists |
//! | --- | --- |
//! | every kind | `metadata.finalizers` (primitive, merged as a set), `metadata.ownerReferences` (key `uid`) |
//! | built-in kinds | `status.conditions` (key `type`) |
//! | pod spec (`spec` of a Pod, `template.spec` of a PodTemplate, `spec.template.spec` of Deployment, StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, `spec.jobTemplate.spec.template.spec` of a CronJob) | `containers`, `initContainers`, `ephemeralContainers` (key `name`); in each of them `ports` (key `containerPort`), `env` (key `name`), `volumeMounts` (key `mountPath`), `volumeDevices` (key `devicePath`); `volumes`, `imagePullSecrets`, `schedulingGates`, `resourceClaims` (key `name`), `hostAliases` (key `ip`), `topologySpreadConstraints` (key `topologyKey`); `tolerations` atomic |
//! | Pod | `status.podIPs`, `status.hostIPs` (key `ip`) |
//! | Service | `spec.ports` (key `port`) |
//! | ServiceAccount | `secrets` (key `name`) |
//!
//! Every other list is replaced as a whole, as Kubernetes does for fields without a patch
//! strategy (and for custom resources). Maps merge recursively and `null` deletes a key.
//! The directives are those of Kubernetes: `$patch: replace|delete` in maps and list
//! items, `$deleteFromPrimitiveList/<field>`, `$setElementOrder/<field>` (the merged list
//! follows that order; live-only items keep their place relative to the ordered items, as
//! in Kubernetes' `mergeSortedSlice`) and `$retainKeys`. Directive keys never reach the
//! result. Differences from the Go code, all on inputs Kubernetes clients never send:
//!
//! - `$patch: merge` is accepted as the explicit default (Kubernetes rejects it): a map or
//!   a keyed list item marked with it is merged as usual, a bare `{"$patch": "merge"}` list
//!   item does nothing;
//! - values added where the live object has nothing are merged into an empty value rather
//!   than copied verbatim, so nested directives and `null`s are handled the same way as in
//!   existing fields (for instance a `$patch: replace` map under a new key keeps its content,
//!   and duplicate items of a new merging list are merged);
//! - error cases that the Go code reports as internal errors (500), such as a list item
//!   without its merge key, are reported as [`PatchError::BadRequest`].

use serde_json::{Map, Value};

use super::error::{PatchError, bad};
use super::lists::{SmpList, list_rule, show};

/// The `$patch` directive key of strategic merge patches.
const PATCH_DIRECTIVE: &str = "$patch";
/// The `$retainKeys` directive key of strategic merge patches.
const RETAIN_KEYS: &str = "$retainKeys";
/// The prefix of `$setElementOrder/<field>` directive keys.
const SET_ELEMENT_ORDER: &str = "$setElementOrder";
/// The prefix of `$deleteFromPrimitiveList/<field>` directive keys.
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";

/// Kubernetes strategic merge patch for built-in kinds. `kind` is the object's kind ("Pod", "Deployment", "Service", "ConfigMap", "Secret", "Namespace", "ServiceAccount", "Event", "Lease", ...).
///
/// Atomic: on error `target` is unchanged.
pub(crate) fn strategic_merge_patch(
    kind: &str,
    target: &mut Value,
    patch: &Value,
) -> Result<(), PatchError> {
    let Value::Object(patch) = patch else {
        return Err(bad("strategic merge patch must be a JSON object"));
    };
    let original = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    let merged = Smp { kind }.merge_map(original, patch, &mut Vec::new())?;
    *target = Value::Object(merged);
    Ok(())
}

/// Strategic merge patch state: the kind that selects the list table.
struct Smp<'k> {
    /// The object's kind.
    kind: &'k str,
}

/// Splits `key` as `<prefix>/<field>`: `Ok(None)` when `key` has another prefix.
fn directive_field<'a>(
    key: &'a str,
    prefix: &str,
    error: &str,
) -> Result<Option<&'a str>, PatchError> {
    let Some(rest) = key.strip_prefix(prefix) else {
        return Ok(None);
    };
    match rest.strip_prefix('/') {
        Some(field) if !field.is_empty() => Ok(Some(field)),
        _ => Err(bad(format!(
            "{error}: {key:?} must be followed by /<field name>"
        ))),
    }
}

/// The JSON type of a value, for the list element checks.
pub(super) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "map",
    }
}

/// Removes directives and `null` map values from a patch value that is stored as is.
/// Returns `None` when the value is a `$patch: delete` map or a bare `$patch` marker.
fn clean(value: &Value) -> Option<Value> {
    match value {
        Value::Object(map) => {
            let is_marker = map.len() == 1 && map.contains_key(PATCH_DIRECTIVE);
            if is_marker || map.get(PATCH_DIRECTIVE).and_then(Value::as_str) == Some("delete") {
                return None;
            }
            Some(Value::Object(clean_map(map)))
        }
        Value::Array(items) => Some(Value::Array(clean_list(items))),
        other => Some(other.clone()),
    }
}

/// [`clean`] for the entries of a map.
fn clean_map(map: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    for (key, value) in map {
        if is_directive_key(key) || value.is_null() {
            continue;
        }
        if let Some(value) = clean(value) {
            out.insert(key.clone(), value);
        }
    }
    out
}

/// [`clean`] for the items of a list.
fn clean_list(items: &[Value]) -> Vec<Value> {
    items.iter().filter_map(clean).collect()
}

/// Whether a map key is a strategic merge patch directive.
fn is_directive_key(key: &str) -> bool {
    key == PATCH_DIRECTIVE
        || key == RETAIN_KEYS
        || key.starts_with(SET_ELEMENT_ORDER)
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
}

/// Position of the item identified by `id` in a list of identities.
fn position(order: &[Option<Value>], id: Option<&Value>) -> Option<usize> {
    let id = id?;
    order
        .iter()
        .position(|candidate| candidate.as_ref() == Some(id))
}

/// The identity of a list item: its merge key value, or the item itself for scalars.
fn identity<'v>(item: &'v Value, key: Option<&str>) -> Option<&'v Value> {
    match key {
        Some(key) => item.get(key),
        None => Some(item),
    }
}

/// Identities of all items of a list.
fn identities(items: &[Value], key: Option<&str>) -> Vec<Option<Value>> {
    items
        .iter()
        .map(|item| identity(item, key).cloned())
        .collect()
}

/// Kubernetes' `normalizeElementOrder`: sorts the patch items by `patch_order` and the
/// server-only items by `server_order`, then interleaves them (`mergeSortedSlice`).
fn normalize_order(
    mut patch_items: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Option<Value>],
    server_order: &[Option<Value>],
    key: Option<&str>,
) -> Vec<Value> {
    patch_items
        .sort_by_key(|item| position(patch_order, identity(item, key)).unwrap_or(usize::MAX));
    server_only
        .sort_by_key(|item| position(server_order, identity(item, key)).unwrap_or(usize::MAX));
    let mut out = Vec::with_capacity(patch_items.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = patch_items.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => {
                let li = position(server_order, identity(l, key));
                let ri = position(server_order, identity(r, key));
                matches!((li, ri), (Some(li), Some(ri)) if li < ri)
            }
        };
        let next = if take_left { left.next() } else { right.next() };
        if let Some(item) = next {
            out.push(item);
        }
    }
    out
}

/// The strategic merge algorithm.
impl Smp<'_> {
    /// The strategic merge strategy of the list at `segments`.
    fn rule(&self, segments: &[String]) -> SmpList {
        list_rule(Some(self.kind), segments).smp
    }

    /// Kubernetes' `mergeMap`: merges `patch` into `original`.
    fn merge_map(
        &self,
        mut original: Map<String, Value>,
        patch: &Map<String, Value>,
        segments: &mut Vec<String>,
    ) -> Result<Map<String, Value>, PatchError> {
        if let Some(directive) = patch.get(PATCH_DIRECTIVE) {
            match directive.as_str() {
                Some("replace") => return Ok(clean_map(patch)),
                Some("delete") => return Ok(Map::new()),
                Some("merge") => {}
                _ => {
                    return Err(bad(format!(
                        "unknown patch type {directive} in map at {}",
                        show(segments)
                    )));
                }
            }
        }
        if let Some(retain) = patch.get(RETAIN_KEYS) {
            apply_retain_keys(&mut original, patch, retain, segments)?;
        }
        let mut ordered: Vec<&str> = Vec::new();
        for (key, order) in patch {
            let Some(field) = directive_field(
                key,
                SET_ELEMENT_ORDER,
                "invalid patch format of setElementOrder list",
            )?
            else {
                continue;
            };
            segments.push(field.to_string());
            let result =
                self.set_element_order(&mut original, field, order, patch.get(field), segments);
            segments.pop();
            if result? {
                ordered.push(field);
            }
        }
        for (key, value) in patch {
            if key == PATCH_DIRECTIVE || key == RETAIN_KEYS || key.starts_with(SET_ELEMENT_ORDER) {
                continue;
            }
            let (field, delete_list) = match directive_field(
                key,
                DELETE_FROM_PRIMITIVE_LIST,
                "invalid patch format of primitive list",
            )? {
                Some(field) => (field, true),
                None => (key.as_str(), false),
            };
            if !delete_list && ordered.contains(&field) {
                continue;
            }
            segments.push(field.to_string());
            let result = self.merge_field(&mut original, field, value, delete_list, segments);
            segments.pop();
            result?;
        }
        Ok(original)
    }

    /// Merges one patch entry into `original[field]`.
    fn merge_field(
        &self,
        original: &mut Map<String, Value>,
        field: &str,
        value: &Value,
        delete_list: bool,
        segments: &mut Vec<String>,
    ) -> Result<(), PatchError> {
        if delete_list {
            let Value::Array(to_delete) = value else {
                return Err(bad(format!(
                    "invalid patch format of primitive list: $deleteFromPrimitiveList/{field} must be a list"
                )));
            };
            if let Some(Value::Array(current)) = original.get_mut(field) {
                current.retain(|item| !to_delete.contains(item));
            }
            return Ok(());
        }
        match value {
            Value::Null => {
                original.shift_remove(field);
            }
            Value::Object(patch) => {
                if let Some(Value::Object(current)) = original.get_mut(field) {
                    let current = std::mem::take(current);
                    let merged = self.merge_map(current, patch, segments)?;
                    original.insert(field.to_string(), Value::Object(merged));
                } else if patch.get(PATCH_DIRECTIVE).and_then(Value::as_str) == Some("delete") {
                    original.shift_remove(field);
                } else {
                    let merged = self.merge_map(Map::new(), patch, segments)?;
                    original.insert(field.to_string(), Value::Object(merged));
                }
            }
            Value::Array(patch) => {
                let rule = self.rule(segments);
                let current = match original.get_mut(field) {
                    Some(Value::Array(current)) => std::mem::take(current),
                    _ => Vec::new(),
                };
                let merged = self.merge_list(current, patch, rule, segments)?;
                original.insert(field.to_string(), Value::Array(merged));
            }
            scalar => {
                original.insert(field.to_string(), scalar.clone());
            }
        }
        Ok(())
    }

    /// Kubernetes' `mergeSlice`: merges a patch list into a live list.
    fn merge_list(
        &self,
        original: Vec<Value>,
        patch: &[Value],
        rule: SmpList,
        segments: &mut Vec<String>,
    ) -> Result<Vec<Value>, PatchError> {
        let merge_key = match rule {
            SmpList::Atomic => return Ok(clean_list(patch)),
            SmpList::Primitive => None,
            SmpList::Keyed(key) => Some(key),
        };
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        let element_type = list_element_type(&original, patch, segments)?;
        if element_type != "map" {
            let mut merged: Vec<Value> = Vec::with_capacity(original.len() + patch.len());
            for item in original.iter().chain(patch) {
                if !merged.contains(item) {
                    merged.push(item.clone());
                }
            }
            let (in_patch, server_only): (Vec<Value>, Vec<Value>) =
                merged.into_iter().partition(|item| patch.contains(item));
            let patch_order = identities(patch, None);
            let server_order = identities(&original, None);
            return Ok(normalize_order(
                in_patch,
                server_only,
                &patch_order,
                &server_order,
                None,
            ));
        }
        let Some(key) = merge_key else {
            return Err(bad(format!(
                "cannot merge lists without merge key for {}",
                show(segments)
            )));
        };
        let mut original = original;
        let mut plain: Vec<&Map<String, Value>> = Vec::new();
        let mut replace = false;
        for item in patch {
            let Value::Object(map) = item else {
                return Err(bad(format!(
                    "list element types are not identical in {}",
                    show(segments)
                )));
            };
            let Some(directive) = map.get(PATCH_DIRECTIVE) else {
                plain.push(map);
                continue;
            };
            match directive.as_str() {
                Some("delete") => {
                    let Some(value) = map.get(key) else {
                        return Err(missing_merge_key(segments, key));
                    };
                    original.retain(|live| live.get(key) != Some(value));
                }
                Some("replace") => replace = true,
                // An item marked `merge` is merged like any other; a bare marker is a no-op.
                Some("merge") if map.contains_key(key) => plain.push(map),
                Some("merge") => {}
                _ => {
                    return Err(bad(format!(
                        "unknown patch type {directive} in list {}",
                        show(segments)
                    )));
                }
            }
        }
        if replace {
            return Ok(plain
                .iter()
                .map(|map| Value::Object(clean_map(map)))
                .collect());
        }
        let server_order = identities(&original, Some(key));
        let mut patch_order = Vec::with_capacity(plain.len());
        for map in &plain {
            let Some(value) = map.get(key) else {
                return Err(missing_merge_key(segments, key));
            };
            patch_order.push(Some(value.clone()));
            match original
                .iter()
                .position(|live| live.get(key) == Some(value))
            {
                Some(index) => {
                    let current = match original.get_mut(index) {
                        Some(Value::Object(current)) => std::mem::take(current),
                        _ => Map::new(),
                    };
                    let merged = self.merge_map(current, map, segments)?;
                    if let Some(slot) = original.get_mut(index) {
                        *slot = Value::Object(merged);
                    }
                }
                None => {
                    let merged = self.merge_map(Map::new(), map, segments)?;
                    original.push(Value::Object(merged));
                }
            }
        }
        let (in_patch, server_only): (Vec<Value>, Vec<Value>) = original
            .into_iter()
            .partition(|item| position(&patch_order, item.get(key)).is_some());
        Ok(normalize_order(
            in_patch,
            server_only,
            &patch_order,
            &server_order,
            Some(key),
        ))
    }

    /// Kubernetes' `mergePatchIntoOriginal` for one `$setElementOrder/<field>` directive.
    /// Returns whether the list was produced (so the main loop must skip `field`).
    fn set_element_order(
        &self,
        original: &mut Map<String, Value>,
        field: &str,
        order: &Value,
        patch_list: Option<&Value>,
        segments: &mut Vec<String>,
    ) -> Result<bool, PatchError> {
        let format_error = || {
            bad(format!(
                "invalid patch format of setElementOrder list: $setElementOrder/{field} and {field} must be lists"
            ))
        };
        let Value::Array(order) = order else {
            return Err(format_error());
        };
        let patch_list = match patch_list {
            None => None,
            Some(Value::Array(items)) => Some(items.as_slice()),
            Some(_) => return Err(format_error()),
        };
        let rule = self.rule(segments);
        let key = match rule {
            SmpList::Keyed(key) => Some(key),
            _ => None,
        };
        if let Some(patch_list) = patch_list {
            validate_set_element_order(patch_list, order, key, segments)?;
        }
        let live = match original.get(field) {
            Some(Value::Array(items)) => Some(items.clone()),
            _ => None,
        };
        let merged = match (live.clone(), patch_list) {
            (Some(live), None) => live,
            (live, Some(patch_list)) => {
                self.merge_list(live.unwrap_or_default(), patch_list, rule, segments)?
            }
            (None, None) => return Ok(false),
        };
        if rule == SmpList::Atomic {
            original.insert(field.to_string(), Value::Array(merged));
            return Ok(true);
        }
        let order_ids = identities(order, key);
        let (in_order, server_only): (Vec<Value>, Vec<Value>) = merged
            .into_iter()
            .partition(|item| position(&order_ids, identity(item, key)).is_some());
        let server_order = identities(live.as_deref().unwrap_or_default(), key);
        let sorted = normalize_order(in_order, server_only, &order_ids, &server_order, key);
        original.insert(field.to_string(), Value::Array(sorted));
        Ok(true)
    }
}

/// The error for a list item without its merge key.
fn missing_merge_key(segments: &[String], key: &str) -> PatchError {
    bad(format!(
        "an item of {} does not contain the declared merge key {key:?}",
        show(segments)
    ))
}

/// Kubernetes' `sliceElementType`: all items must have one JSON type, and not be lists.
fn list_element_type(
    original: &[Value],
    patch: &[Value],
    segments: &[String],
) -> Result<&'static str, PatchError> {
    let mut found: Option<&'static str> = None;
    for item in original.iter().chain(patch) {
        let kind = json_type(item);
        if kind == "list" {
            return Err(PatchError::Invalid(format!(
                "lists of lists are not supported (at {})",
                show(segments)
            )));
        }
        match found {
            None => found = Some(kind),
            Some(previous) if previous != kind => {
                return Err(bad(format!(
                    "list element types are not identical in {}: {previous} and {kind}",
                    show(segments)
                )));
            }
            Some(_) => {}
        }
    }
    Ok(found.unwrap_or("null"))
}

/// Kubernetes' `applyRetainKeysDirective`.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    retain: &Value,
    segments: &[String],
) -> Result<(), PatchError> {
    let Value::Array(retain) = retain else {
        return Err(bad(format!(
            "invalid patch format of retainKeys: $retainKeys at {} must be a list",
            show(segments)
        )));
    };
    let keeps = |key: &str| retain.iter().any(|kept| kept.as_str() == Some(key));
    for (key, value) in patch {
        if value.is_null() || is_directive_key(key) {
            continue;
        }
        if !keeps(key) {
            return Err(bad(format!(
                "invalid patch format of retainKeys: {key:?} is in the patch but not in $retainKeys at {}",
                show(segments)
            )));
        }
    }
    original.retain(|key, _| keeps(key));
    Ok(())
}

/// Kubernetes' `validatePatchWithSetOrderList`: the patch list must follow the order list.
fn validate_set_element_order(
    patch_list: &[Value],
    order: &[Value],
    key: Option<&str>,
    segments: &[String],
) -> Result<(), PatchError> {
    if patch_list.is_empty() || order.is_empty() {
        return Ok(());
    }
    let items: Vec<&Value> = patch_list
        .iter()
        .filter(|item| {
            key.is_none() || item.get(PATCH_DIRECTIVE).and_then(Value::as_str) != Some("delete")
        })
        .collect();
    let (mut patch_index, mut order_index) = (0, 0);
    while let (Some(item), Some(wanted)) = (items.get(patch_index), order.get(order_index)) {
        if item.get(PATCH_DIRECTIVE).is_some() {
            patch_index += 1;
            continue;
        }
        let equal = match key {
            None => item == &wanted,
            Some(key) => match (item.get(key), wanted.get(key)) {
                (Some(a), Some(b)) => a == b,
                _ => return Err(missing_merge_key(segments, key)),
            },
        };
        if equal {
            patch_index += 1;
        }
        order_index += 1;
    }
    if patch_index < items.len() {
        return Err(bad(format!(
            "the order of the items in {} doesn't match $setElementOrder/{}",
            show(segments),
            segments.last().map(String::as_str).unwrap_or_default()
        )));
    }
    Ok(())
}
