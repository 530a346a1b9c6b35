//! Annotation keys of the storages: forming them within Kubernetes' limits, and marking them
//! as Kopf's so that other Kopf-based operators leave them out of their essences.
//!
//! # Forming
//!
//! A handler id becomes the *name* part of an annotation key under the storage's prefix
//! (`kopf.zalando.org/<name>`). Kubernetes allows at most 63 characters in a name, so long ids
//! are cut and given a hashed suffix, `-` + base64(blake2b(id, 4 bytes)) with the altchars
//! `-.` and trailing `=-.` stripped (7 characters in practice). Two generations exist, and
//! Kopf writes both while `v1` is on (its default), reads both and purges both:
//!
//! - **V2**: only the name part is limited to 63 characters. The hash is taken over the raw
//!   id, the cut is made on the safe id (`/`→`.`, `<`,`>`→`_`).
//! - **V1**: the whole key *including the prefix and `/`* is limited to 63 characters. The
//!   hash is taken over the safe id. With a prefix of 55 characters or more the cut length
//!   goes negative and, as in Python's slicing, counts from the end of the id.
//!
//! Lengths and cuts count Unicode scalar values, as Python counts code points.
//!
//! ReplicaSets owned by a Deployment get `-ofDRS` appended to the id before forming, because
//! Kubernetes copies a Deployment's annotations onto its ReplicaSets.
//!
//! # Marking
//!
//! A prefix is recognised as another Kopf-based operator's when it is `kopf.zalando.org`, ends
//! with `.kopf.zalando.org`, or carries a `<prefix>/kopf-managed` annotation. Storages with
//! a prefix not starting with `kopf.` write that marker (`"yes"`) whenever they write.
//!
//! Kopf: `kopf/_cogs/configs/conventions.py` (`StorageKeyFormingConvention`,
//! `StorageKeyMarkingConvention`, `CollisionEvadingConvention`).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine as _;
use base64::alphabet::Alphabet;
use base64::engine::{GeneralPurpose, general_purpose::PAD};
use blake2::digest::consts::U4;
use blake2::{Blake2b, Digest as _};
use foldhash::HashMap;
use serde_json::Value;

use super::fields;

/// The prefix of Kopf's own storages unless configured otherwise.
pub(crate) const DEFAULT_PREFIX: &str = "kopf.zalando.org";

/// Kubernetes' limit on the name part of an annotation key (and, in V1, on the whole key).
const MAX_LENGTH: usize = 63;

/// The annotation name that marks a prefix as used by a Kopf-based operator.
const MARKER_NAME: &str = "kopf-managed";

/// Prefixes that are always Kopf's, with all their subdomains.
const KNOWN_PREFIXES: [&str; 1] = [DEFAULT_PREFIX];

/// The suffix of ids on ReplicaSets owned by Deployments.
const DEPLOYMENT_REPLICASET_MARK: &str = "-ofDRS";

/// Standard base64 with `-` and `.` in place of `+` and `/` (Python's `altchars=b'-.'`).
const SUFFIX_BASE64: GeneralPurpose = {
    let alphabet =
        match Alphabet::new("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-.") {
            Ok(alphabet) => alphabet,
            Err(_) => panic!("the base64 alphabet of key suffixes is invalid"),
        };
    GeneralPurpose::new(&alphabet, PAD)
};

/// Replaces the characters that handler ids contain but annotation names cannot.
pub(crate) fn make_safe_key(key: &str) -> String {
    key.chars()
        .map(|c| match c {
            '/' => '.',
            '<' | '>' => '_',
            c => c,
        })
        .collect()
}

/// The hashed suffix of a cut key: `-` + base64 of the 4-byte blake2b digest, stripped of
/// trailing `=`, `-`, `.` so that the name ends with an alphanumeric character.
pub(crate) fn make_suffix(key: &str) -> String {
    let digest = Blake2b::<U4>::digest(key.as_bytes());
    let mut suffix = format!("-{}", SUFFIX_BASE64.encode(digest));
    let kept = suffix.trim_end_matches(['=', '-', '.']).len();
    suffix.truncate(kept);
    suffix
}

/// The V1 key: the whole key, prefix included, fits into 63 characters (unless the prefix
/// itself is too long; see the module docs).
pub(crate) fn make_v1_key(prefix: &str, key: &str) -> String {
    let safe_key = make_safe_key(key);
    let prefix = prefixed(prefix);
    let prefix_length = prefix.chars().count();
    let room = MAX_LENGTH as isize - prefix_length as isize;
    let fits = safe_key.chars().count() as isize <= room;
    let suffix = if fits {
        String::new()
    } else {
        make_suffix(&safe_key)
    };
    let limit = room - suffix.chars().count() as isize;
    format!("{prefix}{}{suffix}", python_head(&safe_key, limit))
}

/// The V2 key: only the name part fits into 63 characters.
pub(crate) fn make_v2_key(prefix: &str, key: &str) -> String {
    let prefix = prefixed(prefix);
    let suffix = if key.chars().count() > MAX_LENGTH {
        make_suffix(key)
    } else {
        String::new()
    };
    let limit = MAX_LENGTH.saturating_sub(suffix.chars().count());
    let safe_key = make_safe_key(key);
    let head: String = safe_key.chars().take(limit).collect();
    format!("{prefix}{head}{suffix}")
}

/// All keys under which a storage keeps `key` on this object: the V2 key first, then the V1
/// key if `v1` is on and it differs.
///
/// The keys of an id depend only on the prefix, the id and whether the object is a
/// Deployment's ReplicaSet; they are asked for several times per object and cycle, so they
/// are remembered (a handful per operator: one per handler id).
pub(crate) fn make_keys(prefix: &str, v1: bool, key: &str, body: &Value) -> Arc<[String]> {
    /// The keys for one prefix, `v1` and `marked`.
    type Variant = (String, bool, bool, Arc<[String]>);
    /// By id, then by what else the keys depend on: looked up without copying anything.
    type Cache = HashMap<String, Vec<Variant>>;
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    /// Enough for every handler of many operators; past it, the cache starts afresh.
    const CAPACITY: usize = 4096;
    let marked = is_deployment_replicaset(body);
    let cache = CACHE.get_or_init(Mutex::default);
    let same = |(p, v, m, _): &&Variant| p == prefix && *v == v1 && *m == marked;
    if let Some(variants) = crate::helpers::sync::lock(cache).get(key)
        && let Some((.., keys)) = variants.iter().find(same)
    {
        return keys.clone();
    }
    let keys: Arc<[String]> = compute_keys(prefix, v1, key, marked).into();
    let mut cache = crate::helpers::sync::lock(cache);
    if cache.len() >= CAPACITY {
        cache.clear();
    }
    let variants = cache.entry(key.to_owned()).or_default();
    if !variants.iter().any(|variant| same(&variant)) {
        variants.push((prefix.to_owned(), v1, marked, keys.clone()));
    }
    keys
}

fn compute_keys(prefix: &str, v1: bool, key: &str, marked: bool) -> Vec<String> {
    let key = if marked {
        format!("{key}{DEPLOYMENT_REPLICASET_MARK}")
    } else {
        key.to_owned()
    };
    let mut keys = vec![make_v2_key(prefix, &key)];
    if v1 {
        let v1_key = make_v1_key(prefix, &key);
        if v1_key != keys[0] {
            keys.push(v1_key);
        }
    }
    keys
}

/// Whether `-ofDRS` goes after ids on this object: a ReplicaSet owned by a Deployment, whose
/// annotations Kubernetes overwrites with the Deployment's.
fn is_deployment_replicaset(body: &Value) -> bool {
    body.get("kind").and_then(Value::as_str) == Some("ReplicaSet")
        && body
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .is_some_and(|owners| {
                owners
                    .iter()
                    .any(|owner| owner.get("kind").and_then(Value::as_str) == Some("Deployment"))
            })
}

/// The prefixes among these annotation keys that belong to Kopf-based operators.
pub(crate) fn detect_marked_prefixes<'a>(
    keys: impl IntoIterator<Item = &'a str>,
) -> BTreeSet<&'a str> {
    keys.into_iter()
        .filter_map(|key| key.split_once('/'))
        .filter(|(prefix, name)| {
            *name == MARKER_NAME
                || KNOWN_PREFIXES.iter().any(|known| {
                    prefix == known
                        || prefix
                            .strip_suffix(known)
                            .is_some_and(|head| head.ends_with('.'))
                })
        })
        .map(|(prefix, _)| prefix)
        .collect()
}

/// Adds the `<prefix>/kopf-managed: "yes"` marker to the patch unless the prefix is `kopf.*`
/// or the marker is already on the object or in the patch.
pub(crate) fn store_marker(prefix: &str, body: &Value, patch: &mut Value) {
    if prefix.is_empty() || prefix.starts_with("kopf.") {
        return;
    }
    let marker = format!("{prefix}/{MARKER_NAME}");
    let path = ["metadata", "annotations", marker.as_str()];
    if fields::resolve(body, &path).is_none() && fields::resolve(patch, &path).is_none() {
        fields::ensure(patch, &path, Value::from("yes"));
    }
}

/// Whether an annotation's `key` is under `prefix` (`<prefix>/<name>`).
pub(crate) fn is_under(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix)
        .is_some_and(|name| name.starts_with('/'))
}

fn prefixed(prefix: &str) -> String {
    if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    }
}

/// Python's `text[:end]`, in code points, negative `end` counting from the end.
fn python_head(text: &str, end: isize) -> String {
    let length = text.chars().count() as isize;
    let end = if end < 0 { (length + end).max(0) } else { end };
    text.chars().take(end as usize).collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    const PREFIX: &str = "my-operator.example.com";

    /// Vectors from Kopf's `tests/persistence/test_annotations_hashing.py`.
    #[test]
    fn kopf_v1_vectors() {
        let cases = [
            ("a_b.c-d/e", format!("{PREFIX}/a_b.c-d.e")),
            ("x", format!("{PREFIX}/x")),
            (&"x".repeat(39), format!("{PREFIX}/{}", "x".repeat(39))),
            (
                &"x".repeat(40),
                format!("{PREFIX}/{}-tEokcg", "x".repeat(32)),
            ),
            (
                &"y".repeat(40),
                format!("{PREFIX}/{}-VZlvhw", "y".repeat(32)),
            ),
            (
                &"z".repeat(40),
                format!("{PREFIX}/{}-LlPQyA", "z".repeat(32)),
            ),
            (
                &"fn".repeat(323),
                format!("{PREFIX}/{}-Az-r.g", "fn".repeat(16)),
            ),
        ];
        for (key, expected) in cases {
            assert_eq!(make_v1_key(PREFIX, key), expected, "key {key:?}");
        }
    }

    /// Vectors from Kopf's `tests/persistence/test_annotations_hashing.py`.
    #[test]
    fn kopf_v2_vectors() {
        let cases = [
            ("a_b.c-d/e", format!("{PREFIX}/a_b.c-d.e")),
            ("x", format!("{PREFIX}/x")),
            (&"x".repeat(63), format!("{PREFIX}/{}", "x".repeat(63))),
            (
                &"x".repeat(64),
                format!("{PREFIX}/{}-SItAqA", "x".repeat(56)),
            ),
            (
                &"y".repeat(64),
                format!("{PREFIX}/{}-0d251g", "y".repeat(56)),
            ),
            (
                &"z".repeat(64),
                format!("{PREFIX}/{}-E7wvIA", "z".repeat(56)),
            ),
            (
                &"fn".repeat(323),
                format!("{PREFIX}/{}-Az-r.g", "fn".repeat(28)),
            ),
        ];
        for (key, expected) in cases {
            assert_eq!(make_v2_key(PREFIX, key), expected, "key {key:?}");
        }
    }

    /// Produced by Kopf 1.45.2's `make_v1_key`/`make_v2_key` for the corner cases: V1 hashes
    /// the safe key and V2 the raw one, code points are counted, and over-long prefixes make
    /// Python's slice count from the end.
    #[test]
    fn kopf_corner_vectors() {
        let cases: [(&str, String, String, String); 8] = [
            (
                "kopf.zalando.org",
                "parent/child<lambda>".into(),
                "kopf.zalando.org/parent.child_lambda_".into(),
                "kopf.zalando.org/parent.child_lambda_".into(),
            ),
            (
                "kopf.zalando.org",
                "update_fn/spec.field.very.long.path.name.that.goes.beyond.the.limit".into(),
                "kopf.zalando.org/update_fn.spec.field.very.long.path.nam--OZ7gw".into(),
                "kopf.zalando.org/update_fn.spec.field.very.long.path.name.that.goes.beyon-LzXe9g"
                    .into(),
            ),
            (
                "kopf.zalando.org",
                "a/".repeat(40),
                format!("kopf.zalando.org/{}a-OZE4aA", "a.".repeat(19)),
                format!("kopf.zalando.org/{}-VkP9Ag", "a.".repeat(28)),
            ),
            (
                "kopf.zalando.org",
                "ü".repeat(70),
                format!("kopf.zalando.org/{}-eXiZtw", "ü".repeat(39)),
                format!("kopf.zalando.org/{}-eXiZtw", "ü".repeat(56)),
            ),
            (
                "kopf.zalando.org",
                ".".repeat(64),
                format!("kopf.zalando.org/{}-Okpb4g", ".".repeat(39)),
                format!("kopf.zalando.org/{}-Okpb4g", ".".repeat(56)),
            ),
            (
                &"p".repeat(60),
                "abcdefghijklmnop".into(),
                format!("{}/abcdefghijk-hYIadw", "p".repeat(60)),
                format!("{}/abcdefghijklmnop", "p".repeat(60)),
            ),
            (
                &"p".repeat(100),
                "x".repeat(30),
                format!("{}/-6QzZeA", "p".repeat(100)),
                format!("{}/{}", "p".repeat(100), "x".repeat(30)),
            ),
            (
                "",
                "x".repeat(70),
                format!("{}-j8bZbQ", "x".repeat(56)),
                format!("{}-j8bZbQ", "x".repeat(56)),
            ),
        ];
        for (prefix, key, v1, v2) in cases {
            assert_eq!(make_v1_key(prefix, &key), v1, "v1 of {prefix:?} {key:?}");
            assert_eq!(make_v2_key(prefix, &key), v2, "v2 of {prefix:?} {key:?}");
        }
    }

    #[test]
    fn suffix_vectors() {
        assert_eq!(make_suffix("create_fn"), "-AZjFuA");
        assert_eq!(make_suffix("last-handled-configuration"), "-a.A3qw");
        assert_eq!(make_suffix(&"x".repeat(64)), "-SItAqA");
    }

    #[test]
    fn safe_key_replaces_slashes_and_angles() {
        assert_eq!(make_safe_key("a/b<c>d.e_f-g"), "a.b_c_d.e_f-g");
    }

    #[test]
    fn keys_of_both_versions_v2_first() {
        let body = json!({});
        let keys = make_keys("kopf.zalando.org", true, &".".repeat(64), &body);
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0], make_v2_key("kopf.zalando.org", &".".repeat(64)));
        assert_eq!(keys[1], make_v1_key("kopf.zalando.org", &".".repeat(64)));
    }

    #[test]
    fn keys_deduplicated_when_equal() {
        let keys = make_keys("kopf.zalando.org", true, "...", &json!({}));
        assert_eq!(*keys, ["kopf.zalando.org/...".to_owned()]);
    }

    #[test]
    fn keys_v2_only_without_v1() {
        let keys = make_keys("kopf.zalando.org", false, &".".repeat(64), &json!({}));
        assert_eq!(*keys, [make_v2_key("kopf.zalando.org", &".".repeat(64))]);
    }

    #[test]
    fn keys_of_replicasets_owned_by_deployments_are_marked() {
        let cases = [
            ("ReplicaSet", "Deployment", "kopf.dev/xyz-ofDRS"),
            ("ReplicaSet", "OtherOwner", "kopf.dev/xyz"),
            ("OtherKind", "Deployment", "kopf.dev/xyz"),
        ];
        for (kind, owner, expected) in cases {
            let body = json!({"kind": kind, "metadata": {"ownerReferences": [{"kind": owner}]}});
            assert_eq!(
                *make_keys("kopf.dev", true, "xyz", &body),
                [expected.to_owned()]
            );
        }
    }

    #[test]
    fn remembered_keys_are_those_of_the_prefix_and_versions_asked_for() {
        let long = "x".repeat(64);
        for _ in 0..2 {
            // The second round is answered from what the first remembered.
            let both = make_keys("one.example.com", true, &long, &json!({}));
            let v2 = make_keys("one.example.com", false, &long, &json!({}));
            let other = make_keys("two.example.com", false, &long, &json!({}));
            assert_eq!(both.len(), 2);
            assert_eq!(*v2, [make_v2_key("one.example.com", &long)]);
            assert_eq!(*other, [make_v2_key("two.example.com", &long)]);
        }
    }

    #[test]
    fn marked_prefixes_by_domain_and_marker() {
        let keys = [
            "kopf.zalando.org/a",
            "sub.kopf.zalando.org/b",
            "domain.tld/kopf-managed",
            "domain.tld/x",
            "kopf-domain.tld/x",
            "notkopf.zalando.org/x",
            "unprefixed",
        ];
        let prefixes = detect_marked_prefixes(keys);
        let expected: BTreeSet<&str> =
            ["kopf.zalando.org", "sub.kopf.zalando.org", "domain.tld"].into();
        assert_eq!(prefixes, expected);
    }

    #[test]
    fn marker_stored_only_for_non_kopf_prefixes_once() {
        let mut patch = json!({});
        store_marker("kopf.zalando.org", &json!({}), &mut patch);
        store_marker("kopf.example.com", &json!({}), &mut patch);
        assert_eq!(patch, json!({}));

        store_marker("my-op.example.com", &json!({}), &mut patch);
        assert_eq!(
            patch,
            json!({"metadata": {"annotations": {"my-op.example.com/kopf-managed": "yes"}}})
        );

        let body = json!({"metadata": {"annotations": {"my-op.example.com/kopf-managed": "yes"}}});
        let mut patch = json!({});
        store_marker("my-op.example.com", &body, &mut patch);
        assert_eq!(patch, json!({}));
    }

    fn is_valid_name(name: &str) -> bool {
        let bytes = name.as_bytes();
        !bytes.is_empty()
            && name.chars().count() <= MAX_LENGTH
            && bytes[0].is_ascii_alphanumeric()
            && bytes[bytes.len() - 1].is_ascii_alphanumeric()
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(b))
    }

    /// Handler ids as Kopf makes them: names, `parent/child`, `fn/field.path`, `<lambda>`.
    fn handler_id() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9]([a-zA-Z0-9_./<>-]{0,150}[a-zA-Z0-9])?"
    }

    fn dns_prefix() -> impl Strategy<Value = String> {
        "[a-z0-9]([a-z0-9.-]{0,52}[a-z0-9])?"
    }

    proptest! {
        #[test]
        fn forming_never_panics_and_v2_names_fit(prefix in ".{0,80}", key in ".{0,200}") {
            let v2 = make_v2_key(&prefix, &key);
            let name = if prefix.is_empty() { v2.as_str() } else {
                v2.strip_prefix(&format!("{prefix}/")).expect("v2 keeps the prefix")
            };
            prop_assert!(name.chars().count() <= MAX_LENGTH);
            let _ = make_v1_key(&prefix, &key);
            let _ = make_keys(&prefix, true, &key, &json!({}));
        }

        #[test]
        fn v2_keys_are_valid_annotation_keys(prefix in dns_prefix(), key in handler_id()) {
            let v2 = make_v2_key(&prefix, &key);
            let (p, name) = v2.split_once('/').expect("prefixed");
            prop_assert_eq!(p, prefix.as_str());
            prop_assert!(is_valid_name(name), "invalid name {:?}", name);
            if key.chars().count() <= MAX_LENGTH {
                prop_assert_eq!(name, make_safe_key(&key));
            }
        }

        #[test]
        fn v1_keys_fit_whole_and_are_valid(prefix in dns_prefix(), key in handler_id()) {
            let v1 = make_v1_key(&prefix, &key);
            prop_assert!(v1.chars().count() <= MAX_LENGTH, "too long: {:?}", v1);
            let (p, name) = v1.split_once('/').expect("prefixed");
            prop_assert_eq!(p, prefix.as_str());
            prop_assert!(is_valid_name(name), "invalid name {:?}", name);
        }
    }
}
