//! The structured-merge-diff walk behind server-side apply and the bookkeeping of updates:
//! the fields an object sets, merging an applied configuration into a live object, removing
//! fields, and comparing two versions of an object.

use serde_json::{Map, Value};

use super::fields::{FieldPath, FieldSet, Pe, display_path};
use super::lists::{SsaList, list_rule};
use super::managed_fields::LAST_APPLIED;
use super::strategic::json_type;

/// Added, modified and removed paths between two objects (structured-merge-diff `Compare`).
#[derive(Default)]
pub(super) struct Comparison {
    /// Paths in both objects whose leaf values differ.
    pub(super) modified: FieldSet,
    /// Paths only in the new object.
    pub(super) added: FieldSet,
    /// Paths only in the old object.
    pub(super) removed: FieldSet,
}

/// Server-side apply state: the kind that selects the list table.
pub(super) struct Ssa<'k> {
    /// The object's kind, `None` for custom resources.
    pub(super) kind: Option<&'k str>,
}

/// Removes `null` map values, recursively: a `null` in an applied object removes the field.
fn strip_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, value)| !value.is_null())
                .map(|(key, value)| (key.clone(), strip_nulls(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(strip_nulls).collect()),
        scalar => scalar.clone(),
    }
}

/// The server-side apply algorithm: field sets, merge, prune and compare.
impl Ssa<'_> {
    /// The apply list type of the list at `segments`.
    fn rule(&self, segments: &[String]) -> SsaList {
        list_rule(self.kind, segments).ssa
    }

    /// The path element of an applied list item.
    fn item_pe(rule: SsaList, item: &Value) -> Result<Pe, String> {
        match rule {
            SsaList::Map(keys) => {
                let Value::Object(map) = item else {
                    return Err(
                        "associative list with keys has an element that is not a map".to_string(),
                    );
                };
                let mut fields = Map::new();
                for key in keys {
                    match map.get(*key) {
                        Some(value) if !value.is_null() => {
                            fields.insert((*key).to_string(), strip_nulls(value));
                        }
                        _ if *key == "protocol" => {
                            fields.insert((*key).to_string(), Value::String("TCP".into()));
                        }
                        _ => {
                            return Err(format!(
                                "associative list with keys has an element that omits key field {key:?} (and doesn't have default value)"
                            ));
                        }
                    }
                }
                Ok(Pe::key(&fields))
            }
            _ => Ok(Pe::value(&strip_nulls(item))),
        }
    }

    /// The path element of a live list item, tolerating items without keys.
    fn live_item_pe(rule: SsaList, item: &Value, index: usize) -> Pe {
        match rule {
            SsaList::Atomic => Pe::index(index),
            _ => Ssa::item_pe(rule, item).unwrap_or_else(|_| Pe::unkeyable(index)),
        }
    }

    /// Path elements of the items of a live list, first occurrence of each.
    fn live_items(rule: SsaList, items: &[Value]) -> Vec<(Pe, &Value)> {
        let mut out: Vec<(Pe, &Value)> = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let pe = Ssa::live_item_pe(rule, item, index);
            if !out.iter().any(|(known, _)| *known == pe) {
                out.push((pe, item));
            }
        }
        out
    }

    /// The fields set by an applied object (structured-merge-diff `ToFieldSet`); also
    /// validates its keyed lists.
    pub(super) fn apply_set(
        &self,
        value: &Value,
        segments: &mut Vec<String>,
        path: &mut FieldPath,
        out: &mut FieldSet,
    ) -> Result<(), String> {
        match value {
            Value::Object(map) if map.is_empty() => {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
            }
            Value::Object(map) => self.apply_set_fields(map, segments, path, out)?,
            Value::Array(items) => {
                let rule = self.rule(segments);
                if rule == SsaList::Atomic {
                    out.insert(path.clone());
                    return Ok(());
                }
                let mut seen: Vec<Pe> = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    let pe = Ssa::item_pe(rule, item).map_err(|error| {
                        format!("{}: element {index}: {error}", display_path(path))
                    })?;
                    if seen.contains(&pe) {
                        return Err(format!(
                            "{}: duplicate entries for key {}",
                            display_path(path),
                            pe.display()
                        ));
                    }
                    seen.push(pe.clone());
                    path.push(pe);
                    out.insert(path.clone());
                    if let (SsaList::Map(_), Value::Object(map)) = (rule, item) {
                        self.apply_set_fields(map, segments, path, out)?;
                    }
                    path.pop();
                }
            }
            _ => {
                if !path.is_empty() {
                    out.insert(path.clone());
                }
            }
        }
        Ok(())
    }

    /// [`Ssa::apply_set`] for the fields of a map.
    fn apply_set_fields(
        &self,
        map: &Map<String, Value>,
        segments: &mut Vec<String>,
        path: &mut FieldPath,
        out: &mut FieldSet,
    ) -> Result<(), String> {
        for (key, child) in map {
            segments.push(key.clone());
            path.push(Pe::field(key));
            let result = if child.is_null() {
                out.insert(path.clone());
                Ok(())
            } else {
                self.apply_set(child, segments, path, out)
            };
            path.pop();
            segments.pop();
            result?;
        }
        Ok(())
    }

    /// Every path of an object, containers included (what an `Update` from nothing owns).
    pub(super) fn all_paths(
        &self,
        value: &Value,
        segments: &mut Vec<String>,
        path: &mut FieldPath,
        out: &mut FieldSet,
    ) {
        if !path.is_empty() {
            out.insert(path.clone());
        }
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    segments.push(key.clone());
                    path.push(Pe::field(key));
                    self.all_paths(child, segments, path, out);
                    path.pop();
                    segments.pop();
                }
            }
            Value::Array(items) => {
                let rule = self.rule(segments);
                if rule == SsaList::Atomic {
                    return;
                }
                for (pe, item) in Ssa::live_items(rule, items) {
                    path.push(pe);
                    if let SsaList::Map(_) = rule {
                        self.all_paths(item, segments, path, out);
                    } else {
                        out.insert(path.clone());
                    }
                    path.pop();
                }
            }
            _ => {}
        }
    }

    /// The fields of the live object's last-applied-configuration annotation that still have
    /// their last-applied values (`lastAppliedManager`'s allowed conflicts); `None` without
    /// a usable annotation (missing, not a JSON object with a `kind`, another apiVersion
    /// than the applied one, or malformed keyed lists).
    pub(super) fn last_applied_fields(&self, live: &Value, api_version: &str) -> Option<FieldSet> {
        let text = live
            .pointer("/metadata/annotations")?
            .get(LAST_APPLIED)?
            .as_str()
            .filter(|text| !text.is_empty())?;
        let last: Value = serde_json::from_str(text).ok()?;
        last.get("kind")
            .and_then(Value::as_str)
            .filter(|kind| !kind.is_empty())?;
        if last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
            return None;
        }
        let mut set = FieldSet::new();
        self.apply_set(&last, &mut Vec::new(), &mut Vec::new(), &mut set)
            .ok()?;
        let mut comparison = Comparison::default();
        self.compare(
            &last,
            live,
            &mut Vec::new(),
            &mut Vec::new(),
            &mut comparison,
        );
        set.retain(|path| {
            !comparison.modified.contains(path)
                && !comparison.added.contains(path)
                && !comparison.removed.contains(path)
        });
        Some(set)
    }

    /// Merges an applied value into a live one (structured-merge-diff `Merge`).
    pub(super) fn merge(
        &self,
        live: &Value,
        applied: &Value,
        segments: &mut Vec<String>,
    ) -> Result<Value, String> {
        match (live, applied) {
            (Value::Object(live_map), Value::Object(applied_map)) => {
                let mut out = live_map.clone();
                for (key, value) in applied_map {
                    if value.is_null() {
                        out.shift_remove(key);
                        continue;
                    }
                    segments.push(key.clone());
                    let merged = match out.get(key) {
                        Some(current) => self.merge(current, value, segments),
                        None => Ok(strip_nulls(value)),
                    };
                    segments.pop();
                    out.insert(key.clone(), merged?);
                }
                Ok(Value::Object(out))
            }
            (Value::Array(live_items), Value::Array(applied_items)) => {
                let rule = self.rule(segments);
                if rule == SsaList::Atomic || (live_items.is_empty() && applied_items.is_empty()) {
                    return Ok(strip_nulls(applied));
                }
                self.merge_items(rule, live_items, applied_items, segments)
            }
            _ => Ok(strip_nulls(applied)),
        }
    }

    /// Merges the items of a keyed or set list, in structured-merge-diff's order.
    fn merge_items(
        &self,
        rule: SsaList,
        live: &[Value],
        applied: &[Value],
        segments: &mut Vec<String>,
    ) -> Result<Value, String> {
        let mut rhs: Vec<(Pe, &Value)> = Vec::with_capacity(applied.len());
        for item in applied {
            rhs.push((Ssa::item_pe(rule, item)?, item));
        }
        let lhs: Vec<(Pe, &Value)> = live
            .iter()
            .enumerate()
            .map(|(index, item)| (Ssa::live_item_pe(rule, item, index), item))
            .collect();
        let in_lhs = |pe: &Pe| {
            lhs.iter()
                .find(|(known, _)| known == pe)
                .map(|(_, item)| *item)
        };
        let in_rhs = |pe: &Pe| rhs.iter().any(|(known, _)| known == pe);
        let mut shared = rhs
            .iter()
            .map(|(pe, _)| pe)
            .filter(|pe| in_lhs(pe).is_some());
        let mut next_shared = shared.next();
        let mut merged_rhs: Vec<&Pe> = Vec::new();
        let mut out: Vec<Value> = Vec::with_capacity(live.len() + applied.len());
        let (mut li, mut ri) = (0, 0);
        while li < lhs.len() || ri < rhs.len() {
            if let (Some((lpe, litem)), Some((rpe, ritem))) = (lhs.get(li), rhs.get(ri)) {
                if lpe == rpe {
                    merged_rhs.push(rpe);
                    out.push(self.merge_item(rule, Some(litem), ritem, segments)?);
                    li += 1;
                    ri += 1;
                    next_shared = shared.next();
                    continue;
                }
                if in_rhs(lpe) && next_shared.is_some_and(|next| next != lpe) {
                    li += 1;
                    continue;
                }
            }
            if let Some((lpe, litem)) = lhs.get(li) {
                if !in_rhs(lpe) {
                    out.push((*litem).clone());
                    li += 1;
                    continue;
                } else if merged_rhs.contains(&lpe) {
                    li += 1;
                }
            }
            if let Some((rpe, ritem)) = rhs.get(ri) {
                merged_rhs.push(rpe);
                out.push(self.merge_item(rule, in_lhs(rpe), ritem, segments)?);
                ri += 1;
                if next_shared == Some(rpe) {
                    next_shared = shared.next();
                }
            }
        }
        Ok(Value::Array(out))
    }

    /// Merges one applied list item with its live counterpart.
    fn merge_item(
        &self,
        rule: SsaList,
        live: Option<&Value>,
        applied: &Value,
        segments: &mut Vec<String>,
    ) -> Result<Value, String> {
        match (rule, live) {
            (SsaList::Map(_), Some(live)) => self.merge(live, applied, segments),
            _ => Ok(strip_nulls(applied)),
        }
    }

    /// Removes the value at `path`, if present.
    pub(super) fn remove_path(&self, value: &mut Value, path: &[Pe], segments: &mut Vec<String>) {
        let Some((first, rest)) = path.split_first() else {
            return;
        };
        if let Some(name) = first.field_name() {
            let Value::Object(map) = value else { return };
            if rest.is_empty() {
                map.shift_remove(name);
            } else if let Some(child) = map.get_mut(name) {
                segments.push(name.to_string());
                self.remove_path(child, rest, segments);
                segments.pop();
            }
            return;
        }
        let Value::Array(items) = value else { return };
        let rule = self.rule(segments);
        if rest.is_empty() {
            let mut index = 0;
            items.retain(|item| {
                let keep = Ssa::live_item_pe(rule, item, index) != *first;
                index += 1;
                keep
            });
        } else if let Some(child) = items
            .iter_mut()
            .enumerate()
            .find(|(index, item)| Ssa::live_item_pe(rule, item, *index) == *first)
            .map(|(_, item)| item)
        {
            self.remove_path(child, rest, segments);
        }
    }

    /// Structured-merge-diff `Compare` between the live and the new object.
    pub(super) fn compare(
        &self,
        old: &Value,
        new: &Value,
        segments: &mut Vec<String>,
        path: &mut FieldPath,
        out: &mut Comparison,
    ) {
        match (old, new) {
            (Value::Object(old_map), Value::Object(new_map))
                if !(old_map.is_empty() && new_map.is_empty()) =>
            {
                for (key, old_child) in old_map {
                    segments.push(key.clone());
                    path.push(Pe::field(key));
                    match new_map.get(key) {
                        Some(new_child) => self.compare(old_child, new_child, segments, path, out),
                        None => self.all_paths(old_child, segments, path, &mut out.removed),
                    }
                    path.pop();
                    segments.pop();
                }
                for (key, new_child) in new_map {
                    if old_map.contains_key(key) {
                        continue;
                    }
                    segments.push(key.clone());
                    path.push(Pe::field(key));
                    self.all_paths(new_child, segments, path, &mut out.added);
                    path.pop();
                    segments.pop();
                }
            }
            (Value::Array(old_items), Value::Array(new_items))
                if self.rule(segments) != SsaList::Atomic
                    && !(old_items.is_empty() && new_items.is_empty()) =>
            {
                let rule = self.rule(segments);
                let old_items = Ssa::live_items(rule, old_items);
                let new_items = Ssa::live_items(rule, new_items);
                for (pe, old_item) in &old_items {
                    path.push(pe.clone());
                    match new_items.iter().find(|(known, _)| known == pe) {
                        Some((_, new_item)) => {
                            self.compare(old_item, new_item, segments, path, out)
                        }
                        None => self.all_paths(old_item, segments, path, &mut out.removed),
                    }
                    path.pop();
                }
                for (pe, new_item) in &new_items {
                    if old_items.iter().any(|(known, _)| known == pe) {
                        continue;
                    }
                    path.push(pe.clone());
                    self.all_paths(new_item, segments, path, &mut out.added);
                    path.pop();
                }
            }
            _ => {
                if old == new {
                    return;
                }
                if !path.is_empty() {
                    out.modified.insert(path.clone());
                }
                // A container replaced by another type: its children go away or appear.
                let keyed = self.rule(segments) != SsaList::Atomic;
                let structural = |value: &Value| match value {
                    Value::Object(map) => !map.is_empty(),
                    Value::Array(items) => !items.is_empty() && keyed,
                    _ => false,
                };
                if json_type(old) != json_type(new) {
                    for (value, set) in [(old, &mut out.removed), (new, &mut out.added)] {
                        if structural(value) {
                            let mut below = FieldSet::new();
                            self.all_paths(value, segments, path, &mut below);
                            below.remove(path.as_slice());
                            set.extend(below);
                        }
                    }
                }
            }
        }
    }
}
