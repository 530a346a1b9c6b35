//! What must differ between two servers, masked before answers are compared: uids (numbered in
//! the order a sequence first sees them, so that a reference to the wrong object still
//! shows), resourceVersion values (their presence is kept), continue tokens, timestamps,
//! generated names (numbered too), and values each server makes up by nature: certificates
//! and tokens it signs (and their ids), addresses and ports it allocates, ages in tables.
//!
//! Everything else is compared as it is, messages included; only the entries of
//! `managedFields` are put in one order, as two writes in one second leave them in either.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// The masks of one server in one sequence: the uids and generated names it has seen, numbered.
#[derive(Debug, Default)]
pub(crate) struct Masker {
    uids: HashMap<String, usize>,
    names: HashMap<String, usize>,
    /// The `generateName`s requested: names made from them in messages are masked too.
    prefixes: Vec<String>,
    /// Texts of the server's own, and what stands for them (its webhook URL, say).
    literals: Vec<(String, String)>,
}

/// An RFC 3339 time, as Kubernetes writes them (`2026-01-02T03:04:05Z`, with or without
/// fractions), anywhere in a value.
static TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)").expect("a valid regex")
});

/// A uid, as both servers make them (version 4).
static UID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
        .expect("a valid regex")
});

/// A message about resourceVersions (`too old resource version: 5 (12)`, `Too large resource
/// version: 9, current: 7`, the `resourceVersion` of a field error): its numbers are versions.
static ABOUT_VERSIONS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)resource ?version").expect("a valid regex"));

/// The id of a signed token (`JTI=<uuid>`), as reviews and SelfSubjectReviews name its
/// credential: each server signs its own.
static TOKEN_ID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"JTI=[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
        .expect("a valid regex")
});

/// A number standing alone in a text.
static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\b\d+\b").expect("a valid regex"));

/// An age in a table's cells (`0s`, `5m2s`, `3d`): the seconds between the servers' writes
/// show there.
static AGE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\d+[smhdy](\d+[smh])?$").expect("a valid regex"));

/// The names Kubernetes gives the token volumes of pods: `kube-api-access-` and 5 characters.
static TOKEN_VOLUME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"kube-api-access-[a-z0-9]{5}").expect("a valid regex"));

/// Keys whose values each server allocates on its own.
const ALLOCATED: &[&str] = &["clusterIP", "clusterIPs", "nodePort", "healthCheckNodePort"];

/// Keys whose values are the server's own address (discovery's `serverAddressByClientCIDRs`).
const ADDRESSES: &[&str] = &["serverAddress"];

/// The characters of the random suffix that `generateName` gets (Kubernetes' `utilrand`: no
/// vowels, no look-alikes).
const SUFFIX: &str = "[bcdfghjklmnpqrstvwxz2456789]{5}";

impl Masker {
    /// Masks `text` wherever it appears as `stands_for` (the server's own URLs).
    pub(crate) fn literal(&mut self, text: &str, stands_for: &str) {
        self.literals
            .push((text.to_string(), stands_for.to_string()));
    }

    /// Names made from this `generateName` are masked wherever they appear (a message about
    /// an invalid one, say).
    pub(crate) fn prefix(&mut self, prefix: &str) {
        if !prefix.is_empty() && !self.prefixes.iter().any(|p| p == prefix) {
            self.prefixes.push(prefix.to_string());
        }
    }

    /// Masks an answer (a body, or a watch's events) in place.
    pub(crate) fn mask(&mut self, value: &mut Value) {
        self.learn(value);
        self.rewrite(value, None);
        sort_managed_fields(value);
    }

    /// Numbers the uids and generated names the value brings, in the order they appear.
    fn learn(&mut self, value: &Value) {
        match value {
            Value::Object(map) => {
                for (key, child) in map {
                    if key == "uid"
                        && let Some(uid) = child.as_str()
                        && !uid.is_empty()
                    {
                        let next = self.uids.len() + 1;
                        self.uids.entry(uid.to_string()).or_insert(next);
                    }
                    if key == "metadata"
                        && let (Some(prefix), Some(name)) = (
                            child.get("generateName").and_then(Value::as_str),
                            child.get("name").and_then(Value::as_str),
                        )
                        && name.len() > prefix.len()
                        && name.starts_with(prefix)
                    {
                        let next = self.names.len() + 1;
                        self.names.entry(name.to_string()).or_insert(next);
                    }
                    self.learn(child);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| self.learn(item)),
            _ => {}
        }
    }

    fn rewrite(&self, value: &mut Value, key: Option<&str>) {
        match value {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    self.rewrite(child, Some(key));
                }
                // Keys may name uids too: managedFields' `k:{"uid":"..."}` of owner references.
                if map
                    .keys()
                    .any(|k| self.uids.keys().any(|uid| k.contains(uid.as_str())))
                {
                    *map = std::mem::take(map)
                        .into_iter()
                        .map(|(key, child)| (self.masked_string(None, &key).unwrap_or(key), child))
                        .collect();
                }
            }
            Value::Array(items) => {
                for item in items.iter_mut() {
                    self.rewrite(item, key);
                }
            }
            Value::String(text) => {
                if let Some(masked) = self.masked_string(key, text) {
                    *text = masked;
                }
            }
            Value::Number(_) if key.is_some_and(|k| ALLOCATED.contains(&k)) => {
                *value = Value::String("<allocated>".into());
            }
            _ => {}
        }
    }

    fn masked_string(&self, key: Option<&str>, text: &str) -> Option<String> {
        if text.is_empty() {
            return None;
        }
        match key {
            Some("cells") if AGE.is_match(text) => return Some("<age>".into()),
            Some("resourceVersion") => return Some("<rv>".into()),
            Some("continue") => return Some("<continue>".into()),
            Some("token") => return Some("<token>".into()),
            Some(k) if ALLOCATED.contains(&k) => return Some("<allocated>".into()),
            Some(k) if ADDRESSES.contains(&k) => return Some("<address>".into()),
            _ => {}
        }
        if let Some(n) = self.uids.get(text) {
            return Some(format!("<uid#{n}>"));
        }
        if let Some(n) = self.names.get(text) {
            return Some(format!("<generated#{n}>"));
        }
        if UID.is_match(text) {
            return Some("<uid>".into());
        }
        if text.starts_with("-----BEGIN ") {
            return Some("<certificate>".into());
        }
        // Messages and other texts: the uids, names, times and versions within them.
        let mut masked = text.to_string();
        for (uid, n) in &self.uids {
            if masked.contains(uid.as_str()) {
                masked = masked.replace(uid.as_str(), &format!("<uid#{n}>"));
            }
        }
        for (name, n) in &self.names {
            if masked.contains(name.as_str()) {
                masked = masked.replace(name.as_str(), &format!("<generated#{n}>"));
            }
        }
        for prefix in &self.prefixes {
            if masked.contains(prefix.as_str()) {
                let made = Regex::new(&format!("{}{SUFFIX}", regex::escape(prefix)))
                    .expect("a valid regex");
                masked = made.replace_all(&masked, "<generated>").into_owned();
            }
        }
        for (text, stands_for) in &self.literals {
            if masked.contains(text.as_str()) {
                masked = masked.replace(text.as_str(), stands_for);
            }
        }
        let masked = TOKEN_ID.replace_all(&masked, "JTI=<token-id>");
        let masked = TIME.replace_all(&masked, "<time>");
        let masked = TOKEN_VOLUME.replace_all(&masked, "kube-api-access-<generated>");
        let masked = if ABOUT_VERSIONS.is_match(&masked) {
            NUMBER.replace_all(&masked, "<rv>").into_owned()
        } else {
            masked.into_owned()
        };
        (masked != text).then_some(masked)
    }
}

/// Puts the entries of every `managedFields` in one order (by manager, operation,
/// subresource): two writes within a second leave them in either order, and clients look
/// them up by manager.
fn sort_managed_fields(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(entries)) = map.get_mut("managedFields") {
                entries.sort_by_key(|e| {
                    ["manager", "operation", "subresource"]
                        .map(|k| e[k].as_str().unwrap_or_default().to_string())
                });
            }
            map.values_mut().for_each(sort_managed_fields);
        }
        Value::Array(items) => items.iter_mut().for_each(sort_managed_fields),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn uids_are_numbered_and_found_again_in_references_and_messages() {
        let mut masker = Masker::default();
        let mut answer = json!({
            "metadata": {"uid": "0b5e53b4-4ad0-4b8e-9b47-6a3b0a6ab3a1", "resourceVersion": "17",
                         "creationTimestamp": "2026-01-02T03:04:05Z"},
            "ownerReferences": [{"uid": "c0a3b2f0-1111-4222-8333-444455556666"}],
            "message": "Precondition failed: UID in precondition: c0a3b2f0-1111-4222-8333-444455556666",
        });
        masker.mask(&mut answer);
        assert_eq!(
            answer,
            json!({
                "metadata": {"uid": "<uid#1>", "resourceVersion": "<rv>", "creationTimestamp": "<time>"},
                "ownerReferences": [{"uid": "<uid#2>"}],
                "message": "Precondition failed: UID in precondition: <uid#2>",
            })
        );
    }

    #[test]
    fn generated_names_are_numbered() {
        let mut masker = Masker::default();
        let mut answer = json!({"metadata": {"generateName": "x-", "name": "x-7kq2z"}});
        masker.mask(&mut answer);
        assert_eq!(answer["metadata"]["name"], "<generated#1>");
        assert_eq!(answer["metadata"]["generateName"], "x-");
    }

    #[test]
    fn versions_in_messages_are_masked() {
        let masker = Masker::default();
        let masked = masker.masked_string(Some("message"), "too old resource version: 5 (12)");
        assert_eq!(
            masked.as_deref(),
            Some("too old resource version: <rv> (<rv>)")
        );
    }
}
